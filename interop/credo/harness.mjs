#!/usr/bin/env node
// A Credo-ts 0.6 agent playing a user's wallet (as the Hologram app does), driven over JSON
// lines: one command per line on stdin, one event per line on stdout, diagnostics on stderr.
// See README.md for the protocol. Usage:
//
//   node harness.mjs [--label NAME] [--peer 4|2|1] [--log off|error|warn|info|debug|trace]
//
// Everything is in memory (storage and keys); the process is the wallet and dies with it.

// stdout carries the protocol only: send every console method there to stderr instead (Credo's
// ConsoleLogger, and any library, may print with console.log/info/debug).
console.log = console.info = console.debug = console.trace = console.error

import { createInterface } from 'node:readline'

import { createServer } from 'node:http'

import { ActionMenuModule, ActionMenuRole } from '@credo-ts/action-menu'
import {
  Agent,
  ConsoleLogger,
  InjectionSymbols,
  JsonTransformer,
  Kms,
  LogLevel,
  PeerDidNumAlgo,
  W3cCredentialRecord,
  W3cJsonLdVerifiableCredential,
  W3cJwtVerifiableCredential,
  utils,
} from '@credo-ts/core'
import {
  DidCommBasicMessageEventTypes,
  DidCommBasicMessageRole,
  DidCommAutoAcceptCredential,
  DidCommConnectionEventTypes,
  DidCommCredentialEventTypes,
  DidCommCredentialState,
  DidCommCredentialV2Protocol,
  DidCommDidExchangeState,
  DidCommDifPresentationExchangeProofFormatService,
  DidCommEventTypes,
  DidCommHttpOutboundTransport,
  DidCommJsonLdCredentialFormatService,
  DidCommMediatorPickupStrategy,
  DidCommMessage,
  DidCommMessageSender,
  DidCommModule,
  DidCommOutboundMessageContext,
  DidCommProofEventTypes,
  DidCommProofState,
  DidCommProofV2Protocol,
  DidCommWsOutboundTransport,
  parseInvitationJson,
  parseMessageType,
} from '@credo-ts/didcomm'
import { DidCommHttpInboundTransport, DidCommWsInboundTransport, agentDependencies } from '@credo-ts/node'
import { QuestionAnswerModule } from '@credo-ts/question-answer'
import { WebSocketServer } from 'ws'

import { InMemoryStorageService } from './lib/memory-storage.mjs'
import { SodiumKeyManagementService } from './lib/sodium-kms.mjs'

// ---- output ----------------------------------------------------------------------------------

function emit(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`)
}

function die(message) {
  emit({ event: 'error', message })
  process.stdout.write('', () => process.exit(1))
}

// ---- options ---------------------------------------------------------------------------------

function parseArgs(argv) {
  const opts = { label: 'Credo wallet', peer: 4, log: 'warn', role: 'wallet', mediator: '', endpoint: 'ws' }
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s)
    const value = inline ?? argv[++i]
    if (value === undefined) throw new Error(`${flag} needs a value`)
    if (flag === '--label') opts.label = value
    else if (flag === '--peer') opts.peer = Number(value)
    else if (flag === '--log') opts.log = value
    else if (flag === '--role') opts.role = value
    else if (flag === '--mediator') opts.mediator = value
    else if (flag === '--endpoint') opts.endpoint = value
    else throw new Error(`unknown flag ${flag}`)
  }
  if (![1, 2, 4].includes(opts.peer)) throw new Error(`--peer must be 4, 2 or 1, not ${opts.peer}`)
  if (!['wallet', 'mediator'].includes(opts.role)) throw new Error(`--role must be wallet or mediator, not ${opts.role}`)
  if (!['ws', 'http'].includes(opts.endpoint)) throw new Error(`--endpoint must be ws or http, not ${opts.endpoint}`)
  if (opts.mediator && opts.role === 'mediator') throw new Error('a mediator is not mediated (--mediator)')
  if (!(opts.log in LogLevel) || typeof LogLevel[opts.log] !== 'number') throw new Error(`bad --log ${opts.log}`)
  return opts
}

const peerAlgos = {
  4: PeerDidNumAlgo.ShortFormAndLongForm,
  2: PeerDidNumAlgo.MultipleInceptionKeyWithoutDoc,
  1: PeerDidNumAlgo.GenesisDoc,
}

// ---- the agent -------------------------------------------------------------------------------

// listenLoopback makes an HTTP server listen on 127.0.0.1 at a port the OS picks.
async function listenLoopback(server) {
  await new Promise((resolve, reject) => server.once('listening', resolve).once('error', reject).listen(0, '127.0.0.1'))
  return server.address().port
}

async function startAgent(opts) {
  const storage = new InMemoryStorageService()
  const kms = new SodiumKeyManagementService()
  const mediated = Boolean(opts.mediator)
  const mediator = opts.role === 'mediator'

  // Inbound: a wallet listens on HTTP (a mediated wallet, like a phone, on nothing: it picks its
  // messages up from its mediator); a mediator on HTTP and WebSocket. Credo's HTTP inbound
  // transport listens on all interfaces at the port it is given: listen on loopback only, at a
  // port the OS picks (0), by wrapping its Express app's listen.
  const inbound = []
  let http
  if (!mediated) {
    http = new DidCommHttpInboundTransport({ port: 0 })
    const listen = http.app.listen.bind(http.app)
    http.app.listen = (port) => listen(port, '127.0.0.1')
    inbound.push(http)
  }
  let wsServer
  if (mediator) {
    wsServer = new WebSocketServer({ server: createServer() })
    inbound.push(new DidCommWsInboundTransport({ server: wsServer }))
  }

  const didcomm = {
    transports: { inbound, outbound: [new DidCommHttpOutboundTransport(), new DidCommWsOutboundTransport()] },
    // Otherwise Credo's defaults: didexchange 1.1 and connections 1.0 handshakes, did:peer:4,
    // the default DIDComm v1 media type, every default protocol module.
    connections: { autoAcceptConnections: true, peerNumAlgoForDidExchangeRequests: peerAlgos[opts.peer] },
    // Present-proof 2.0 with DIF presentation exchange: W3C credentials, JSON-LD and VC-JWT.
    proofs: {
      proofProtocols: [new DidCommProofV2Protocol({ proofFormats: [new DidCommDifPresentationExchangeProofFormatService()] })],
    },
    // Issue-credential 2.0 with W3C JSON-LD credentials (RFC 0593): a holder of packbot's
    // receipts. Offers wait for the user (accept-credential); the credential that comes is
    // stored and acked when it is what was offered (content approved).
    credentials: {
      autoAcceptCredentials: DidCommAutoAcceptCredential.ContentApproved,
      credentialProtocols: [new DidCommCredentialV2Protocol({ credentialFormats: [new DidCommJsonLdCredentialFormatService()] })],
    },
  }
  if (mediator) didcomm.mediator = { autoAcceptMediationRequests: true }
  if (mediated) {
    // As phone wallets do: pickup v2 in live mode over WebSocket (provisioned in provision()).
    didcomm.mediationRecipient = { mediatorPickupStrategy: DidCommMediatorPickupStrategy.PickUpV2LiveMode }
  }
  const agent = new Agent({
    config: { logger: new ConsoleLogger(LogLevel[opts.log]), autoUpdateStorageOnStartup: true },
    dependencies: agentDependencies,
    modules: {
      // The storage service must be registered before the Agent constructor checks for it: a
      // module's register() runs inside that constructor, before the check.
      storage: {
        register(dependencyManager) {
          dependencyManager.registerInstance(InjectionSymbols.StorageService, storage)
        },
      },
      kms: new Kms.KeyManagementModule({ backends: [kms] }),
      didcomm: new DidCommModule(didcomm),
      // The Hologram app's protocol modules (npm cannot resolve them against 0.6-alpha by
      // themselves: package.json overrides their core and didcomm with ours).
      actionMenu: new ActionMenuModule(),
      questionAnswer: new QuestionAnswerModule(),
    },
  })

  // Endpoints are read when an invitation, a DID or a mediation grant is made, so they can be
  // set once the servers listen (a mediated wallet gets its mediator's).
  let port = 0
  if (mediator) {
    const wsPort = await listenLoopback(wsServer.options.server)
    await agent.initialize()
    port = await serverPort(http.server)
    const ws = `ws://127.0.0.1:${wsPort}`
    const hp = `http://127.0.0.1:${port}`
    agent.didcomm.config.endpoints = opts.endpoint === 'ws' ? [ws, hp] : [hp, ws]
  } else if (mediated) {
    await agent.initialize()
    await provision(agent, opts.mediator)
  } else {
    await agent.initialize()
    port = await serverPort(http.server)
    agent.didcomm.config.endpoints = [`http://127.0.0.1:${port}`]
  }
  return { agent, port, kms }
}

async function serverPort(server) {
  if (!server.listening) await new Promise((resolve, reject) => server.once('listening', resolve).once('error', reject))
  return server.address().port
}

// provision connects to the mediator of invitationUrl, asks for mediation and starts picking
// messages up. Credo's own provisioning (mediatorInvitationUrl) sends the mediation request
// while its DID exchange complete is still in flight on the same WebSocket, and Credo's mediator
// closes that socket on the complete (it asks for no return route), so the grant is lost and
// initialize fails about one time in two. Here the request waits for the connection, and is
// sent again (on a new socket) when its grant does not come back.
async function provision(agent, invitationUrl) {
  const { connectionRecord } = await agent.didcomm.oob.receiveInvitationFromUrl(invitationUrl, {
    label: 'mediation',
    autoAcceptInvitation: true,
    autoAcceptConnection: true,
  })
  const connection = await agent.didcomm.connections.returnWhenIsConnected(connectionRecord.id, { timeoutMs: 60000 })
  const recipient = agent.didcomm.mediationRecipient
  let mediation
  for (let attempt = 1; !mediation; attempt++) {
    try {
      mediation = await recipient.requestAndAwaitGrant(connection, 5000)
    } catch (error) {
      if (attempt === 3) throw new Error(`the mediator granted no mediation: ${error?.message ?? error}`)
      console.error(`mediation request ${attempt} unanswered, asking again`)
    }
  }
  await recipient.setDefaultMediator(mediation)
  await recipient.initiateMessagePickup(mediation, DidCommMediatorPickupStrategy.PickUpV2LiveMode)
  return mediation
}

// ---- inbound messages ------------------------------------------------------------------------

// Protocols the wallet shows to its user, by protocol name and message name.
function classify(connectionId, json) {
  const parsed = parseMessageType(json['@type'] ?? '')
  const base = { connectionId, id: json['@id'], threadId: json['~thread']?.thid ?? json['@id'] }
  if (json['~thread']?.pthid) base.parentThreadId = json['~thread'].pthid
  const what = `${parsed.protocolName}/${parsed.messageName}`
  switch (what) {
    case 'action-menu/menu':
      return {
        event: 'menu',
        ...base,
        title: json.title ?? '',
        description: json.description ?? '',
        options: (json.options ?? []).map((o) => ({
          name: o.name,
          title: o.title ?? '',
          description: o.description ?? '',
          disabled: Boolean(o.disabled),
        })),
        body: json,
      }
    case 'questionanswer/question':
      return {
        event: 'question',
        ...base,
        questionText: json.question_text ?? '',
        questionDetail: json.question_detail ?? '',
        validResponses: (json.valid_responses ?? []).map((r) => r.text),
        body: json,
      }
    case 'user-profile/profile': {
      const p = json.profile ?? {}
      return {
        event: 'profile',
        ...base,
        displayName: p.displayName ?? '',
        description: p.description ?? '',
        preferredLanguage: p.preferredLanguage ?? '',
        sendBackYours: Boolean(json.send_back_yours),
        body: json,
      }
    }
    case 'receipts/message-receipts':
      return {
        event: 'receipts',
        ...base,
        receipts: (json.receipts ?? []).map((r) => ({ messageId: r.message_id, state: r.state, timestamp: r.timestamp })),
        body: json,
      }
    default:
      return { event: 'message', ...base, type: json['@type'], body: json }
  }
}

// Protocols whose inbound messages produce no event of their own: texts have theirs, the rest
// is connection plumbing Credo deals with.
const unreported = new Set([
  'basicmessage',
  'didexchange',
  'connections',
  'out-of-band',
  'trust_ping',
  'discover-features',
  'coordinate-mediation',
  'messagepickup',
  'routing',
  // Proof requests are reported as proof-request events, with the record id to answer them.
  'present-proof',
  // Credential offers likewise, as credential-offer events.
  'issue-credential',
])

function observe(agent, wallet) {
  // Count inbound envelopes by packing (Authcrypt / Anoncrypt / plaintext), for `stats`.
  agent.events.on(DidCommEventTypes.DidCommMessageReceived, ({ payload }) => {
    let alg = 'plaintext'
    try {
      if (payload.message?.protected) alg = JSON.parse(Buffer.from(payload.message.protected, 'base64url')).alg
    } catch {
      alg = 'unreadable'
    }
    wallet.inbound[alg] = (wallet.inbound[alg] ?? 0) + 1
  })

  agent.events.on(DidCommConnectionEventTypes.DidCommConnectionStateChanged, ({ payload }) => {
    const c = payload.connectionRecord
    if (c.state === DidCommDidExchangeState.Completed && payload.previousState !== c.state) {
      emit({ event: 'connected', connectionId: c.id, theirLabel: c.theirLabel ?? '', role: c.role, did: c.did, theirDid: c.theirDid })
    }
  })

  agent.events.on(DidCommBasicMessageEventTypes.DidCommBasicMessageStateChanged, ({ payload }) => {
    const { message, basicMessageRecord: record } = payload
    if (record.role !== DidCommBasicMessageRole.Receiver) return
    const json = message.toJSON()
    const event = { event: 'text', connectionId: record.connectionId, id: message.id, content: message.content, threadId: message.threadId }
    if (message.thread?.parentThreadId) event.parentThreadId = message.thread.parentThreadId
    if (json.sent_time) event.sentTime = json.sent_time
    event.body = json
    emit(event)
  })

  // Messages of protocols this Credo agent has no handler for (action-menu, question-answer,
  // user-profile, receipts — modules a Hologram wallet adds on top of Credo) reach no handler:
  // the fallback handler makes Credo accept them silently instead of answering with a problem
  // report. The middleware reports every inbound message but basic messages (reported above)
  // and connection plumbing, whether Credo handles it (problem reports, present-proof, ...) or
  // not; Credo's handlers still run.
  agent.didcomm.registerMessageHandlerMiddleware(async (ctx, next) => {
    if (!unreported.has(parseMessageType(ctx.message.type).protocolName)) {
      const json = ctx.message.toJSON()
      const event = classify(ctx.connection?.id ?? '', json)
      if (event.event === 'menu' && ctx.connection) wallet.lastMenuThread.set(ctx.connection.id, event.threadId)
      emit(event)
    }
    await next()
  })
  agent.didcomm.setFallbackMessageHandler(async () => undefined)

  // Proof requests, as the wallet's user sees them: the record id is what present and decline
  // take. Every later state (done, declined, abandoned) is reported too.
  agent.events.on(DidCommProofEventTypes.ProofStateChanged, ({ payload }) => {
    const r = payload.proofRecord
    if (r.state === payload.previousState) return
    const base = { connectionId: r.connectionId ?? '', proofExchangeId: r.id, threadId: r.threadId, state: r.state }
    if (r.state === DidCommProofState.RequestReceived) emit({ event: 'proof-request', ...base })
    else emit({ event: 'proof', ...base, errorMessage: r.errorMessage ?? '' })
  })

  // Credential offers, as the wallet's user sees them: the record id is what accept-credential
  // and decline-credential take. Every later state (done, declined, abandoned) is reported too.
  agent.events.on(DidCommCredentialEventTypes.DidCommCredentialStateChanged, ({ payload }) => {
    const r = payload.credentialExchangeRecord
    if (r.state === payload.previousState) return
    const base = { connectionId: r.connectionId ?? '', credentialExchangeId: r.id, threadId: r.threadId, state: r.state }
    if (r.state === DidCommCredentialState.OfferReceived) emit({ event: 'credential-offer', ...base })
    else emit({ event: 'credential', ...base, errorMessage: r.errorMessage ?? '' })
  })
}

// ---- commands --------------------------------------------------------------------------------

function need(cmd, field) {
  const v = cmd[field]
  if (typeof v !== 'string' || v === '') throw new Error(`${cmd.cmd}: "${field}" is required`)
  return v
}

async function sendRaw(agent, connectionId, json, { anoncrypt = false } = {}) {
  const plain = { '@id': utils.uuid(), ...json }
  if (typeof plain['@type'] !== 'string') throw new Error('message: "@type" is required')
  // A generic DidCommMessage keeps the fields it has no decorator for, so it serializes back to
  // the JSON it was made from (with ~thread, ~timing, ... parsed as Credo's decorators).
  const message = JsonTransformer.fromJSON(plain, DidCommMessage)
  const connection = await agent.didcomm.connections.getById(connectionId)
  const sender = agent.dependencyManager.resolve(DidCommMessageSender)
  if (!anoncrypt) {
    await sender.sendMessage(new DidCommOutboundMessageContext(message, { agentContext: agent.context, connection }))
    return message.id
  }
  // Credo packs Anoncrypt only for forward messages (mediators). To send one on a connection,
  // use the sender's own steps for a connection (the peer's DIDComm services) but with no
  // sender key: the envelope service then packs Anoncrypt (sealed box, no sender).
  const { services } = await sender.retrieveServicesByConnection(agent.context, connection)
  if (services.length === 0) throw new Error(`connection ${connectionId} has no DIDComm service`)
  await sender.sendToService(
    new DidCommOutboundMessageContext(message, {
      agentContext: agent.context,
      connection,
      serviceParams: { service: services[0], senderKey: undefined, returnRoute: false },
    })
  )
  return message.id
}

// describe is a failed verification's reasons, for the driver.
function describe(result) {
  const parts = [String(result.error?.message ?? result.error ?? 'invalid')]
  for (const [name, check] of Object.entries(result.validations ?? {})) {
    if (check && check.isValid === false) parts.push(`${name}: ${check.error?.message ?? check.error ?? 'invalid'}`)
  }
  return parts.join('; ')
}

function thread(thid) {
  return thid ? { '~thread': { thid } } : {}
}

async function run(agent, wallet, opts, cmd) {
  switch (cmd.cmd) {
    case 'create-invitation': {
      const record = await agent.didcomm.oob.createInvitation({
        label: cmd.label ?? opts.label,
        multiUseInvitation: Boolean(cmd.multiUse),
      })
      const url = record.outOfBandInvitation.toUrl({ domain: agent.didcomm.config.endpoints[0] })
      return { event: 'invitation', url, invitationId: record.outOfBandInvitation.id }
    }
    case 'receive-invitation': {
      const text = need(cmd, 'url').trim()
      const config = { label: cmd.label ?? opts.label, autoAcceptInvitation: true, autoAcceptConnection: true }
      const { connectionRecord } = text.startsWith('{')
        ? await agent.didcomm.oob.receiveInvitation(parseInvitationJson(JSON.parse(text)), config)
        : await agent.didcomm.oob.receiveInvitationFromUrl(text, config)
      if (!connectionRecord) throw new Error('the invitation started no connection (no handshake protocol?)')
      const c = await agent.didcomm.connections.returnWhenIsConnected(connectionRecord.id, {
        timeoutMs: cmd.timeoutMs ?? 60000,
      })
      return { event: 'connected', connectionId: c.id, theirLabel: c.theirLabel ?? '', role: c.role, did: c.did, theirDid: c.theirDid }
    }
    case 'send-text': {
      const connectionId = need(cmd, 'connectionId')
      const record = await agent.didcomm.basicMessages.sendMessage(connectionId, need(cmd, 'content'), cmd.replyTo || undefined)
      return { event: 'sent', id: record.threadId }
    }
    case 'send-message': {
      if (typeof cmd.message !== 'object' || cmd.message === null) throw new Error('send-message: "message" is required')
      const id = await sendRaw(agent, need(cmd, 'connectionId'), cmd.message, { anoncrypt: Boolean(cmd.anoncrypt) })
      return { event: 'sent', id }
    }
    case 'menu-request': {
      // Credo's action-menu module, as the Hologram app uses it.
      const record = await agent.modules.actionMenu.requestMenu({ connectionId: need(cmd, 'connectionId') })
      return { event: 'sent', id: record.threadId }
    }
    case 'perform': {
      const connectionId = need(cmd, 'connectionId')
      if (cmd.threadId || cmd.params) {
        // A perform in a thread of the caller's choosing: the module only answers its active menu.
        const thid = cmd.threadId ?? wallet.lastMenuThread.get(connectionId)
        const message = { '@type': 'https://didcomm.org/action-menu/1.0/perform', name: need(cmd, 'name'), params: cmd.params ?? {}, ...thread(thid) }
        return { event: 'sent', id: await sendRaw(agent, connectionId, message) }
      }
      // The module's perform answers the active menu (the last one received), in its thread.
      const menu = await agent.modules.actionMenu.findActiveMenu({ connectionId, role: ActionMenuRole.Requester })
      if (!menu) throw new Error(`no menu received on connection ${connectionId}`)
      await agent.modules.actionMenu.performAction({ connectionId, performedAction: { name: need(cmd, 'name') } })
      return { event: 'sent', id: menu.threadId }
    }
    case 'answer': {
      // Credo's question-answer module: it checks the response is one of the valid ones.
      const threadId = need(cmd, 'threadId')
      const [question] = await agent.modules.questionAnswer.findAllByQuery({ threadId })
      if (!question) throw new Error(`no question with thread ${threadId}`)
      const record = await agent.modules.questionAnswer.sendAnswer(question.id, need(cmd, 'response'))
      return { event: 'sent', id: record.threadId }
    }
    case 'holder-did': {
      // A did:key (Ed25519) the wallet holds the key of: the subject of credentials it presents.
      const result = await agent.dids.create({ method: 'key', options: { createKey: { type: { kty: 'OKP', crv: 'Ed25519' } } } })
      if (result.didState.state !== 'finished') throw new Error(`create did:key: ${result.didState.reason ?? result.didState.state}`)
      return { event: 'did', did: result.didState.did }
    }
    case 'store-credential': {
      // A W3C credential as Credo stores it: JSON-LD (an object) or VC-JWT (a string). Credo's
      // default document loader is used whenever it reads the credential's contexts.
      const c = cmd.credential
      const credential =
        typeof c === 'string'
          ? W3cJwtVerifiableCredential.fromSerializedJwt(c.trim())
          : JsonTransformer.fromJSON(c, W3cJsonLdVerifiableCredential)
      const record = await agent.w3cCredentials.store({ record: W3cCredentialRecord.fromCredential(credential) })
      return { event: 'stored', id: record.id }
    }
    case 'present': {
      // The user agrees: Credo picks the matching credentials and signs the presentation.
      const proofExchangeRecordId = need(cmd, 'proofExchangeId')
      const { proofFormats } = await agent.didcomm.proofs.selectCredentialsForRequest({ proofExchangeRecordId })
      const record = await agent.didcomm.proofs.acceptRequest({ proofExchangeRecordId, proofFormats })
      return { event: 'sent', id: record.threadId }
    }
    case 'accept-credential': {
      // The user accepts an offered credential: Credo requests it, then stores it.
      const record = await agent.didcomm.credentials.acceptOffer({ credentialExchangeRecordId: need(cmd, 'credentialExchangeId') })
      return { event: 'sent', id: record.threadId }
    }
    case 'decline-credential': {
      const record = await agent.didcomm.credentials.declineOffer({
        credentialExchangeRecordId: need(cmd, 'credentialExchangeId'),
        sendProblemReport: true,
      })
      return { event: 'sent', id: record.threadId }
    }
    case 'verify-credential': {
      // Credo verifies a W3C credential as a wallet does when it is issued one (its default
      // document loader, no network).
      const c = cmd.credential
      const credential =
        typeof c === 'string'
          ? W3cJwtVerifiableCredential.fromSerializedJwt(c.trim())
          : JsonTransformer.fromJSON(c, W3cJsonLdVerifiableCredential)
      const result = await agent.w3cCredentials.verifyCredential({ credential })
      return { event: 'verified', isValid: result.isValid, error: result.isValid ? '' : describe(result) }
    }
    case 'credentials': {
      // The W3C credentials the wallet holds, as Credo stored them (JSON-LD: an object; JWT: a string).
      const records = await agent.w3cCredentials.getAll()
      return { event: 'credentials', credentials: records.map((r) => r.firstCredential.encoded) }
    }
    case 'decline': {
      const record = await agent.didcomm.proofs.declineRequest({
        proofExchangeRecordId: need(cmd, 'proofExchangeId'),
        sendProblemReport: true,
        problemReportDescription: cmd.description || undefined,
      })
      return { event: 'sent', id: record.threadId }
    }
    case 'profile': {
      const profile = { displayName: cmd.displayName ?? '' }
      if (cmd.description) profile.description = cmd.description
      if (cmd.preferredLanguage) profile.preferredLanguage = cmd.preferredLanguage
      const message = {
        '@type': 'https://didcomm.org/user-profile/1.0/profile',
        profile,
        send_back_yours: Boolean(cmd.sendBackYours),
      }
      return { event: 'sent', id: await sendRaw(agent, need(cmd, 'connectionId'), message) }
    }
    case 'stats':
      return { event: 'stats', kms: { ...wallet.kms.counts }, inbound: { ...wallet.inbound } }
    default:
      throw new Error(`unknown command ${JSON.stringify(cmd.cmd)}`)
  }
}

// ---- main ------------------------------------------------------------------------------------

async function main() {
  const opts = parseArgs(process.argv.slice(2))
  const { agent, port, kms } = await startAgent(opts)
  const wallet = { lastMenuThread: new Map(), inbound: {}, kms }
  observe(agent, wallet)

  let stopping = false
  const shutdown = async () => {
    if (stopping) return
    stopping = true
    try {
      await agent.shutdown()
    } catch (error) {
      console.error('shutdown:', error)
    }
    process.stdout.write('', () => process.exit(0))
  }

  // Commands run one at a time, in order (so that two sends keep their order on the wire);
  // shutdown does not wait for them.
  let queue = Promise.resolve()
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity })
  lines.on('line', (line) => {
    if (line.trim() === '') return
    let cmd
    try {
      cmd = JSON.parse(line)
    } catch (error) {
      // Not the protocol: the driver is broken, stop rather than guess.
      die(`bad command line: ${error.message}`)
      return
    }
    if (typeof cmd !== 'object' || cmd === null || Array.isArray(cmd)) {
      die(`bad command line: not a JSON object: ${line}`)
      return
    }
    const reqId = cmd.reqId
    if (cmd.cmd === 'shutdown') {
      void shutdown()
      return
    }
    queue = queue.then(async () => {
      try {
        emit({ ...(await run(agent, wallet, opts, cmd)), ...(reqId === undefined ? {} : { reqId }) })
      } catch (error) {
        // The caller gets the message; the stack is for debugging.
        console.error(`${cmd.cmd} failed:`, LogLevel[opts.log] <= LogLevel.debug ? error : error?.message)
        emit({ event: 'error', message: `${cmd.cmd}: ${error?.message ?? error}`, ...(reqId === undefined ? {} : { reqId }) })
      }
    })
  })
  // The driver went away: nothing more will come.
  lines.on('close', () => void shutdown())

  emit({ event: 'ready', label: opts.label, endpoint: agent.didcomm.config.endpoints[0], endpoints: agent.didcomm.config.endpoints, port, peer: opts.peer, role: opts.role })
}

process.on('unhandledRejection', (error) => {
  console.error('unhandled rejection:', error)
  die(`unhandled rejection: ${error?.message ?? error}`)
})

main().catch((error) => {
  console.error(error)
  die(error?.message ?? String(error))
})

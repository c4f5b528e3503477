// A Credo 0.6 key management backend on libsodium-wrappers (pure WebAssembly, no native
// module), holding its keys in memory.
//
// Why: without the native Askar wallet, Credo's own Node backend (@credo-ts/node
// NodeKeyManagementService) cannot pack DIDComm v1 (RFC 0019) envelopes: those wrap the content
// key with XSalsa20-Poly1305 after an "ECDH-HSALSA20" key agreement — libsodium's crypto_box
// (authcrypt) and sealed box (anoncrypt) — and node:crypto has neither. This backend implements
// exactly what a DIDComm v1 wallet needs:
//   - keys: Ed25519 and X25519 (create, import, get public key, delete);
//   - sign / verify: EdDSA (alias Ed25519) with Ed25519 keys;
//   - encrypt / decrypt: ChaCha20-Poly1305 (C20P, 12-byte nonce) and XChaCha20-Poly1305 (XC20P,
//     24-byte nonce) with a given symmetric key, for the envelope's content;
//   - encrypt / decrypt: XSalsa20-Poly1305 with ECDH-HSALSA20, for the envelope's content key:
//     with our key → crypto_box_easy / crypto_box_open_easy (24-byte nonce as `iv`), without
//     our key (encrypt) or without their key (decrypt) → crypto_box_seal / crypto_box_seal_open;
//   - random bytes.
// DIDComm v1 uses one Ed25519 key for signing and for key agreement: like Askar, an Ed25519
// private key is converted to X25519 (crypto_sign_ed25519_sk_to_curve25519) for crypto_box.
// Callers pass the peer's key already as X25519 (Credo converts it).

import { Kms, TypedArrayEncoder, utils } from '@credo-ts/core'
import sodium from 'libsodium-wrappers'

await sodium.ready

const b64u = (bytes) => TypedArrayEncoder.toBase64URL(bytes)
const fromB64u = (s) => TypedArrayEncoder.fromBase64(s)

const SIGNING_ALGS = ['EdDSA', 'Ed25519']
const CONTENT_ALGS = ['C20P', 'XC20P']
const HSALSA = 'ECDH-HSALSA20'
const XSALSA = 'XSALSA20-POLY1305'

export class SodiumKeyManagementService {
  static backend = 'sodium'
  backend = SodiumKeyManagementService.backend

  // contextCorrelationId → Map(keyId → private JWK)
  #keys = new Map()

  // How often each operation ran, by name (e.g. 'crypto_box_easy'), for tests to check which
  // code paths a conversation went through.
  counts = {}

  #count(name) {
    this.counts[name] = (this.counts[name] ?? 0) + 1
  }

  #store(agentContext) {
    let keys = this.#keys.get(agentContext.contextCorrelationId)
    if (!keys) {
      keys = new Map()
      this.#keys.set(agentContext.contextCorrelationId, keys)
    }
    return keys
  }

  isOperationSupported(_agentContext, op) {
    switch (op.operation) {
      case 'deleteKey':
      case 'randomBytes':
        return true
      case 'createKey':
        return op.type.kty === 'OKP' && (op.type.crv === 'Ed25519' || op.type.crv === 'X25519')
      case 'importKey':
        return op.privateJwk.kty === 'OKP' && (op.privateJwk.crv === 'Ed25519' || op.privateJwk.crv === 'X25519')
      case 'sign':
      case 'verify':
        return SIGNING_ALGS.includes(op.algorithm)
      case 'encrypt':
      case 'decrypt': {
        const alg = (op.encryption ?? op.decryption).algorithm
        if (!op.keyAgreement) return CONTENT_ALGS.includes(alg)
        return op.keyAgreement.algorithm === HSALSA && alg === XSALSA
      }
      default:
        return false
    }
  }

  randomBytes(_agentContext, { length }) {
    return sodium.randombytes_buf(length)
  }

  async getPublicKey(agentContext, keyId) {
    const jwk = this.#store(agentContext).get(keyId)
    return jwk ? { ...Kms.publicJwkFromPrivateJwk(jwk), kid: keyId } : null
  }

  async createKey(agentContext, { type, keyId }) {
    if (type.kty !== 'OKP' || (type.crv !== 'Ed25519' && type.crv !== 'X25519')) {
      throw new Kms.KeyManagementAlgorithmNotSupportedError(`key type ${JSON.stringify(type)}`, this.backend)
    }
    const kid = keyId ?? utils.uuid()
    this.#assertAbsent(agentContext, kid)
    let x
    let d
    if (type.crv === 'Ed25519') {
      d = sodium.randombytes_buf(sodium.crypto_sign_SEEDBYTES)
      x = sodium.crypto_sign_seed_keypair(d).publicKey
    } else {
      d = sodium.randombytes_buf(sodium.crypto_scalarmult_SCALARBYTES)
      x = sodium.crypto_scalarmult_base(d)
    }
    const privateJwk = { kty: 'OKP', crv: type.crv, x: b64u(x), d: b64u(d), kid }
    this.#store(agentContext).set(kid, privateJwk)
    return { keyId: kid, publicJwk: { ...Kms.publicJwkFromPrivateJwk(privateJwk), kid } }
  }

  async importKey(agentContext, { privateJwk }) {
    if (privateJwk.kty !== 'OKP' || (privateJwk.crv !== 'Ed25519' && privateJwk.crv !== 'X25519')) {
      throw new Kms.KeyManagementAlgorithmNotSupportedError(`importing kty '${privateJwk.kty}'`, this.backend)
    }
    const kid = privateJwk.kid ?? utils.uuid()
    this.#assertAbsent(agentContext, kid)
    // Check that x is the public key of d.
    const d = fromB64u(privateJwk.d)
    const x =
      privateJwk.crv === 'Ed25519' ? sodium.crypto_sign_seed_keypair(d).publicKey : sodium.crypto_scalarmult_base(d)
    if (b64u(x) !== privateJwk.x) throw new Kms.KeyManagementError('Imported JWK: x does not match d')
    const jwk = { ...privateJwk, kid }
    this.#store(agentContext).set(kid, jwk)
    return { keyId: kid, publicJwk: { ...Kms.publicJwkFromPrivateJwk(jwk), kid } }
  }

  async deleteKey(agentContext, { keyId }) {
    return this.#store(agentContext).delete(keyId)
  }

  async sign(agentContext, { keyId, algorithm, data }) {
    const jwk = this.#get(agentContext, keyId)
    Kms.assertAllowedSigningAlgForKey(jwk, algorithm)
    Kms.assertKeyAllowsSign(jwk)
    this.#count('sign')
    const { privateKey } = sodium.crypto_sign_seed_keypair(fromB64u(jwk.d))
    return { signature: sodium.crypto_sign_detached(data, privateKey) }
  }

  async verify(agentContext, { key, algorithm, data, signature }) {
    const jwk = key.keyId ? this.#get(agentContext, key.keyId) : key.publicJwk
    if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519') {
      throw new Kms.KeyManagementAlgorithmNotSupportedError(`verify with ${Kms.getJwkHumanDescription(jwk)}`, this.backend)
    }
    Kms.assertAllowedSigningAlgForKey(jwk, algorithm)
    Kms.assertKeyAllowsVerify(jwk)
    this.#count('verify')
    let ok = false
    try {
      ok = sodium.crypto_sign_verify_detached(signature, data, fromB64u(jwk.x))
    } catch {
      ok = false // malformed signature or key
    }
    return ok ? { verified: true, publicJwk: Kms.publicJwkFromPrivateJwk(jwk) } : { verified: false }
  }

  async encrypt(agentContext, { key, encryption, data }) {
    if (key.keyAgreement) {
      const { algorithm, externalPublicJwk, keyId } = key.keyAgreement
      this.#assertHsalsa(algorithm, encryption.algorithm, externalPublicJwk)
      const theirs = fromB64u(externalPublicJwk.x)
      if (!keyId) {
        this.#count('crypto_box_seal')
        return { encrypted: sodium.crypto_box_seal(data, theirs) }
      }
      this.#count('crypto_box_easy')
      const ours = this.#x25519Secret(agentContext, keyId, algorithm)
      const nonce = encryption.iv ?? sodium.randombytes_buf(sodium.crypto_box_NONCEBYTES)
      return { encrypted: sodium.crypto_box_easy(data, nonce, theirs, ours), iv: nonce } // authcrypt
    }
    const cek = this.#contentKey(agentContext, key, encryption.algorithm, Kms.assertKeyAllowsEncrypt)
    this.#count(`encrypt ${encryption.algorithm}`)
    const aad = encryption.aad ?? null
    if (encryption.algorithm === 'C20P') {
      const iv = encryption.iv ?? sodium.randombytes_buf(sodium.crypto_aead_chacha20poly1305_ietf_NPUBBYTES)
      const r = sodium.crypto_aead_chacha20poly1305_ietf_encrypt_detached(data, aad, null, iv, cek)
      return { encrypted: r.ciphertext, tag: r.mac, iv }
    }
    const iv = encryption.iv ?? sodium.randombytes_buf(sodium.crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    const r = sodium.crypto_aead_xchacha20poly1305_ietf_encrypt_detached(data, aad, null, iv, cek)
    return { encrypted: r.ciphertext, tag: r.mac, iv }
  }

  async decrypt(agentContext, { key, decryption, encrypted }) {
    try {
      if (key.keyAgreement) {
        const { algorithm, externalPublicJwk, keyId } = key.keyAgreement
        this.#assertHsalsa(algorithm, decryption.algorithm, externalPublicJwk)
        const ours = this.#x25519Secret(agentContext, keyId, algorithm)
        this.#count(externalPublicJwk ? 'crypto_box_open_easy' : 'crypto_box_seal_open')
        if (!externalPublicJwk) {
          // anoncrypt: the sealed box carries its ephemeral public key; open needs ours too.
          return { data: sodium.crypto_box_seal_open(encrypted, sodium.crypto_scalarmult_base(ours), ours) }
        }
        if (!decryption.iv) throw new Kms.KeyManagementError(`${XSALSA} with a sender key needs 'iv'`)
        return { data: sodium.crypto_box_open_easy(encrypted, decryption.iv, fromB64u(externalPublicJwk.x), ours) }
      }
      const cek = this.#contentKey(agentContext, key, decryption.algorithm, Kms.assertKeyAllowsDecrypt)
      this.#count(`decrypt ${decryption.algorithm}`)
      const aad = decryption.aad ?? null
      const open =
        decryption.algorithm === 'C20P'
          ? sodium.crypto_aead_chacha20poly1305_ietf_decrypt_detached
          : sodium.crypto_aead_xchacha20poly1305_ietf_decrypt_detached
      return { data: open(null, encrypted, decryption.tag, aad, decryption.iv, cek) }
    } catch (error) {
      if (error instanceof Kms.KeyManagementError) throw error
      throw new Kms.KeyManagementError('Error decrypting', { cause: error })
    }
  }

  #get(agentContext, keyId) {
    const jwk = this.#store(agentContext).get(keyId)
    if (!jwk) throw new Kms.KeyManagementKeyNotFoundError(keyId, [this.backend])
    return jwk
  }

  #assertAbsent(agentContext, keyId) {
    if (this.#store(agentContext).has(keyId)) throw new Kms.KeyManagementKeyExistsError(keyId, this.backend)
  }

  #assertHsalsa(keyAgreementAlg, encAlg, externalPublicJwk) {
    if (keyAgreementAlg !== HSALSA || encAlg !== XSALSA) {
      throw new Kms.KeyManagementAlgorithmNotSupportedError(
        `key agreement '${keyAgreementAlg}' with encryption '${encAlg}'`,
        this.backend
      )
    }
    if (externalPublicJwk && (externalPublicJwk.kty !== 'OKP' || externalPublicJwk.crv !== 'X25519')) {
      throw new Kms.KeyManagementAlgorithmNotSupportedError(
        `${HSALSA} with ${Kms.getJwkHumanDescription(externalPublicJwk)}`,
        this.backend
      )
    }
  }

  // Our X25519 secret for crypto_box: an X25519 key as is, an Ed25519 key converted (DIDComm v1).
  #x25519Secret(agentContext, keyId, algorithm) {
    const jwk = this.#get(agentContext, keyId)
    Kms.assertJwkAsymmetric(jwk, keyId)
    Kms.assertAllowedKeyDerivationAlgForKey(jwk, algorithm)
    Kms.assertKeyAllowsDerive(jwk)
    if (jwk.crv === 'X25519') return fromB64u(jwk.d)
    const { privateKey } = sodium.crypto_sign_seed_keypair(fromB64u(jwk.d))
    return sodium.crypto_sign_ed25519_sk_to_curve25519(privateKey)
  }

  // The symmetric key for C20P / XC20P: given inline as an 'oct' JWK (what the DIDComm v1
  // envelope does) or, less usual, by id.
  #contentKey(agentContext, key, algorithm, assertAllows) {
    const jwk = key.privateJwk ?? (key.keyId ? this.#get(agentContext, key.keyId) : undefined)
    if (!jwk || jwk.kty !== 'oct') {
      throw new Kms.KeyManagementAlgorithmNotSupportedError(`content encryption without an 'oct' key`, this.backend)
    }
    Kms.assertAllowedEncryptionAlgForKey(jwk, algorithm)
    assertAllows(jwk)
    return fromB64u(jwk.k)
  }
}

// The client the MCP conformance suite drives: `packbot mcp smoke`, as a deployer runs it.
//
//   node driver.mjs <packbot> <server-url>
//
// The suite appends the URL of its scenario's server and sets MCP_CONFORMANCE_SCENARIO (and
// MCP_CONFORMANCE_CONTEXT with what a deployer would know: a pre-registered client, a key, a
// workload's token). For each scenario this writes the pack a deployer would write, runs smoke
// with the flags a deployer would give, and plays the person's browser when smoke prints its
// sign-in URL (the suite's authorization server approves at once). Everything MCP and OAuth is
// packbot's: this program only writes files, starts smoke and opens URLs.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [packbot, url] = process.argv.slice(2);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO || '';
const context = process.env.MCP_CONFORMANCE_CONTEXT ? JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT) : {};
const dir = mkdtempSync(join(tmpdir(), 'packbot-conformance-'));
const signInPrompt = 'Open this URL to sign in: ';

// The Client ID Metadata Document URL the suite's authorization servers expect (it is not
// fetched: conformance-test.local does not resolve).
const cimd = 'https://conformance-test.local/client-metadata.json';

// server is the pack's entry for the scenario's server; flags are smoke's flags for every run.
function configure() {
  const server = { name: 'conformance', transport: 'streamable-http', url };
  const flags = [];
  if (scenario === 'auth/client-credentials-basic') {
    server.authentication = { mode: 'client_credentials', clientId: context.client_id, clientSecret: context.client_secret };
  } else if (scenario === 'auth/client-credentials-jwt') {
    writeFileSync(join(dir, 'client-key.pem'), context.private_key_pem, { mode: 0o600 });
    server.authentication = { mode: 'client_credentials', clientId: context.client_id, privateKeyFile: join(dir, 'client-key.pem') };
  } else if (scenario === 'auth/wif-jwt-bearer') {
    writeFileSync(join(dir, 'workload.jwt'), context.valid_jwt, { mode: 0o600 });
    server.authentication = { mode: 'workload_identity', clientId: context.client_id, assertionFile: join(dir, 'workload.jwt') };
  } else if (scenario.startsWith('auth/')) {
    server.accessMode = 'user-controlled';
    server.authentication = { mode: 'oauth2' };
    if (context.client_id) flags.push('--client-id', context.client_id);
    if (context.client_secret) flags.push('--client-secret', context.client_secret);
    flags.push('--client-metadata-url', cimd);
  }
  const pack = { metadata: { id: 'conformance' }, mcp: { servers: [server] } };
  writeFileSync(join(dir, 'agent-pack.json'), JSON.stringify(pack));
  return flags;
}

// smoke runs packbot mcp smoke with flags, passing its output through, and opens the sign-in
// URL it prints. It resolves to the exit status and stdout.
function smoke(flags) {
  const args = ['mcp', 'smoke', '--pack', join(dir, 'agent-pack.json'), '--server', 'conformance', ...flags];
  return new Promise((resolve) => {
    const p = spawn(packbot, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let pending = '';
    p.stdout.on('data', (d) => { out += d; process.stdout.write(d); });
    p.stderr.on('data', (d) => {
      process.stderr.write(d);
      pending += d;
      let i;
      while ((i = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, i);
        pending = pending.slice(i + 1);
        if (line.startsWith(signInPrompt)) browse(line.slice(signInPrompt.length));
      }
    });
    p.on('close', (code) => resolve({ code: code ?? 1, out }));
  });
}

// browse opens the authorization URL as a browser would: the authorization server redirects
// to smoke's loopback callback.
async function browse(link) {
  try {
    const r = await fetch(link);
    await r.text();
    console.error(`driver: browser came back with HTTP ${r.status}`);
  } catch (e) {
    console.error(`driver: browser failed: ${e}`);
  }
}

// tools lists the tools smoke offers (its --json report).
async function tools(flags) {
  const { code, out } = await smoke([...flags, '--json']);
  if (code !== 0) return { code, tools: [] };
  return { code, tools: JSON.parse(out).tools };
}

async function main() {
  const flags = configure();
  const call = (name, args = {}, extra = []) => smoke([...flags, '--call', name, '--args', JSON.stringify(args), ...extra]);
  switch (scenario) {
    case 'tools_call':
      return (await call('add_numbers', { a: 5, b: 3 })).code;
    case 'elicitation-sep1034-client-defaults':
      return (await call('test_client_elicitation_defaults', {}, ['--elicit', 'defaults'])).code;
    case 'sse-retry':
      return (await call('test_reconnection')).code;
    case 'json-schema-2020-12-preservation': {
      // What packbot kept of the focal tool's schema goes back to the server verbatim.
      const listed = await tools(flags);
      const focal = listed.tools.find((t) => t.name === 'json_schema_2020_12_tool');
      if (!focal) return 1;
      return (await call('json_schema_echo', { schema: focal.inputSchema })).code;
    }
    case 'sep-2322-client-request-state': {
      // Each tool once, as a deployer trying them would; the server's question is answered
      // with the form's defaults. Some calls are refused by design.
      for (const name of ['test_mrtr_echo_state', 'test_mrtr_no_state', 'test_mrtr_unrelated', 'test_mrtr_no_result_type']) {
        await call(name, {}, ['--elicit', 'defaults']);
      }
      return 0;
    }
    case 'http-standard-headers': {
      const listed = await tools(flags);
      if (listed.tools.length > 0) await call(listed.tools[0].name);
      return listed.code;
    }
    case 'http-custom-headers': {
      for (const c of context.toolCalls || []) await call(c.name, c.arguments || {});
      return 0;
    }
    case 'http-invalid-tool-headers': {
      // The tools packbot offers (the malformed ones left out), each called.
      const listed = await tools(flags);
      for (const t of listed.tools) await call(t.name, { region: 'us-west1' });
      return listed.code;
    }
  }
  if (scenario.startsWith('auth/')) {
    // One run (one sign-in), as a deployer trying the server: list its tools, call test-tool.
    // Where the suite expects the client to stop (a mismatched resource or issuer, a server
    // that keeps asking for scopes), smoke fails, as it should.
    return (await call('test-tool')).code;
  }
  return (await smoke(flags)).code; // connect and list: request-metadata, json-schema-ref-no-deref, …
}

let code = 1;
try {
  code = await main();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(code);

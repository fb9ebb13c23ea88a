// A real OpenID Certified provider (panva's oidc-provider, pinned in package.json) on
// 127.0.0.1 for the gateway's single sign-on tests (tests/oidc_*.rs).
//
//   node provider.js genkey PREFIX KID     writes PREFIX.jwk.json (private JWK, RS256),
//                                          PREFIX.der (private, PKCS#1: tests forge tokens
//                                          with it) and PREFIX.pub.pem (SPKI)
//   node provider.js serve CONFIG.json     serves until SIGTERM; prints "ready: ISSUER"
//
// CONFIG.json: { "port", "issuer", "resource" (the audience of its access tokens),
//   "keys": [jwk files; the first signs], "accounts": { "alice": { "groups": [...] } },
//   "clients": [oidc-provider client metadata, plus "account": the account whose groups a
//   client_credentials token of this client carries (a script's service account)] }
// Access tokens for `resource` are JWTs (RFC 9068) with `groups` and `preferred_username`;
// the login form (devInteractions) accepts any password for a configured account.
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';

function genkey(prefix, kid) {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
  writeFileSync(`${prefix}.jwk.json`, JSON.stringify(jwk), { mode: 0o600 });
  writeFileSync(`${prefix}.der`, privateKey.export({ format: 'der', type: 'pkcs1' }), { mode: 0o600 });
  writeFileSync(`${prefix}.pub.pem`, publicKey.export({ format: 'pem', type: 'spki' }));
}

async function serve(configFile) {
  // Loaded here only: genkey needs none of it.
  const { default: Provider } = await import('oidc-provider');
  const config = JSON.parse(readFileSync(configFile, 'utf8'));
  const accounts = config.accounts;
  const accountOfClient = Object.fromEntries(
    config.clients.filter((c) => c.account).map((c) => [c.client_id, c.account]),
  );
  const clients = config.clients.map(({ account, ...metadata }) => metadata);
  const claimsOf = (id) => ({
    sub: id,
    preferred_username: id,
    groups: accounts[id]?.groups ?? [],
  });
  const provider = new Provider(config.issuer, {
    clients,
    jwks: { keys: config.keys.map((file) => JSON.parse(readFileSync(file, 'utf8'))) },
    findAccount: async (ctx, id) =>
      accounts[id] ? { accountId: id, claims: async () => claimsOf(id) } : undefined,
    claims: { openid: ['sub'], profile: ['preferred_username'], groups: ['groups'] },
    scopes: ['openid', 'profile', 'groups', 'api'],
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      rpInitiatedLogout: { enabled: true },
      backchannelLogout: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => config.resource,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: 'api',
          audience: config.resource,
          accessTokenFormat: 'jwt',
          accessTokenTTL: 600,
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
    // The gateway under test listens on 127.0.0.1, which oidc-provider's guard against
    // server-side request forgery refuses for back-channel logouts: lifted here only.
    fetch: (url, { dispatcher, ...options }) => globalThis.fetch(url, options),
    extraTokenClaims: async (ctx, token) => {
      const id = token.accountId ?? accountOfClient[token.clientId];
      return id ? claimsOf(id) : undefined;
    },
    loadExistingGrant: async (ctx) => {
      // Consent is implied for the configured clients: the tests log in, not consent.
      const grant = new provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope('openid profile groups api');
      grant.addResourceScope(config.resource, 'api');
      await grant.save();
      return grant;
    },
  });
  provider.on('backchannel.success', (ctx, client) => console.log(`backchannel.success ${client.clientId}`));
  provider.on('backchannel.error', (ctx, err, client) => console.log(`backchannel.error ${client.clientId}: ${err.message}`));
  provider.on('end_session.success', () => console.log('end_session.success'));
  const server = http.createServer(provider.callback());
  server.listen(config.port, '127.0.0.1', () => console.log(`ready: ${config.issuer}`));
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

const [command, ...args] = process.argv.slice(2);
if (command === 'genkey' && args.length === 2) {
  genkey(...args);
} else if (command === 'serve' && args.length === 1) {
  await serve(args[0]);
} else {
  console.error('usage: provider.js genkey PREFIX KID | provider.js serve CONFIG.json');
  process.exit(64);
}

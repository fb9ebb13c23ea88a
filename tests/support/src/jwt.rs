//! JWTs: decode a payload without verifying, and forge HS256 tokens for negative tests.

use serde_json::{json, Value};

fn b64_json(part: &str) -> Value {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The decoded (unverified) payload of a JWT.
pub fn jwt_payload(token: &str) -> Value {
    b64_json(token.split('.').nth(1).expect("JWT has a payload"))
}

pub fn jwt_header(token: &str) -> Value {
    b64_json(token.split('.').next().unwrap())
}

pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Claims like the gateway's, for `username`, issued `age` seconds ago and living `ttl` seconds.
pub fn claims(issuer: &str, username: &str, age: i64, ttl: i64) -> Value {
    let iat = now_secs() - age;
    json!({
        "iss": issuer, "sub": username, "username": username,
        "jti": format!("forged-{}-{}", username, rand::random::<u64>()),
        "iat": iat, "exp": iat + ttl,
    })
}

/// `claims` with the credential fingerprint (`cred`) of `token`, one the gateway issued to the
/// same user: what a token of ours carries besides the standard claims.
pub fn with_credential_of(mut claims: Value, token: &str) -> Value {
    claims["cred"] = jwt_payload(token)["cred"].clone();
    claims
}

/// An HS256 JWT over `claims` signed with `secret`.
pub fn forge_token(secret: &[u8], claims: &Value) -> String {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret),
    )
    .unwrap()
}

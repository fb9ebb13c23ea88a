//! A real Redis for the tests of several gateways: the server the stores' own unit tests
//! use (src/state/redis_server.rs), and the `[state]` lines that point a gateway at it as
//! the shipped ACL's user, with the test deployment's encryption key.

#[path = "../../src/state/redis_server.rs"]
mod redis_server;
#[path = "../../src/state/redis/sealed.rs"]
mod sealed;

pub use redis_server::RedisServer;

use super::Gateway;

impl Gateway {
    /// Keep revocations, lockouts and the service account's token in `redis`.
    pub fn redis_state(self, redis: &RedisServer) -> Self {
        let key = format!(
            "{{ kid = {:?}, secret_file = {:?} }}",
            redis_server::ENCRYPTION_KID,
            redis.encryption_key_file()
        );
        self.extra_toml("state", "backend = \"redis\"")
            .extra_toml("state.redis", &format!("url = {:?}", redis.url()))
            .extra_toml(
                "state.redis",
                &format!("username = {:?}", redis_server::GATEWAY_USER),
            )
            .extra_toml(
                "state.redis",
                &format!("password_file = {:?}", redis.gateway_password_file()),
            )
            .extra_toml("state.redis", &format!("encryption_keys = [{key}]"))
            .extra_toml("state.redis", "connect_timeout_ms = 300")
            .extra_toml("state.redis", "command_timeout_ms = 300")
    }
}

/// What a gateway of the test deployment sealed in the Redis key `key`.
pub fn unsealed(key: &str, stored: &str) -> Option<String> {
    let secret = redis_server::ENCRYPTION_SECRET.as_bytes();
    let sealer = sealed::Sealer::new([(redis_server::ENCRYPTION_KID, secret)])?;
    String::from_utf8(sealer.open(key, stored)?).ok()
}

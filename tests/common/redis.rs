//! A real Redis for the tests of several gateways: the server the stores' own unit tests
//! use (src/state/redis_server.rs), and the `[state]` lines that point a gateway at it.

#[path = "../../src/state/redis_server.rs"]
mod redis_server;

pub use redis_server::RedisServer;

use super::Gateway;

impl Gateway {
    /// Keep revocations, lockouts and the service account's token in `redis`.
    pub fn redis_state(self, redis: &RedisServer) -> Self {
        self.extra_toml("state", "backend = \"redis\"")
            .extra_toml("state.redis", &format!("url = {:?}", redis.url()))
            .extra_toml("state.redis", "connect_timeout_ms = 300")
            .extra_toml("state.redis", "command_timeout_ms = 300")
    }
}

//! The limit on failed logins per client address (`auth.max_failed_logins_per_ip_per_minute`),
//! beside the per-username lockout: a login takes a token from its client's bucket before
//! its password is hashed, and gets it back unless the password was wrong. An empty bucket
//! is 429 with `Retry-After`, so one client trying a password over many usernames is slowed
//! down whatever the usernames, while other clients log in as before.

use std::net::IpAddr;

use super::Auth;
use super::AuthError;
use crate::client_addr::ClientNet;
use crate::state::{Take, UnixMillis};

impl Auth {
    /// Takes this login's token from its client's bucket: the bucket it came from (`None`:
    /// no limit, or no client address), or 429 when the bucket is empty.
    pub(super) async fn take_login_token(
        &self,
        client: Option<IpAddr>,
        now_ms: UnixMillis,
    ) -> Result<Option<ClientNet>, AuthError> {
        let (Some(rate), Some(ip)) = (self.failed_logins_per_client, client) else {
            return Ok(None);
        };
        let client = ClientNet::of(ip);
        match self
            .stores
            .failed_logins
            .take(&client, rate, now_ms)
            .await?
        {
            Take::Taken => Ok(Some(client)),
            Take::Empty { retry_in_ms } => {
                self.metrics.auth.login_rate_limited(client.is_ipv6());
                tracing::info!(%client, "login refused: too many failed logins from this client");
                Err(AuthError::RateLimited {
                    retry_after: retry_in_ms.div_ceil(1000).max(1),
                })
            }
        }
    }

    /// Gives back the token [`Auth::take_login_token`] took: this login did not fail.
    pub(super) async fn give_back_login_token(
        &self,
        taken: Option<ClientNet>,
        now_ms: UnixMillis,
    ) -> Result<(), AuthError> {
        let (Some(rate), Some(client)) = (self.failed_logins_per_client, taken) else {
            return Ok(());
        };
        self.stores
            .failed_logins
            .give_back(&client, rate, now_ms)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{auth_limited, credentials, hashes, post, request, NOW_MS};
    use super::super::{AuthError, AuthRequest, AuthSubject};
    use crate::state::BucketRate;

    const RATE: BucketRate = BucketRate {
        burst: 3,
        refill_ms: 20_000,
    };

    fn from<'a>(headers: &'a http::HeaderMap, ip: &str, user: &str, pw: &str) -> AuthRequest<'a> {
        let mut req = request(headers, credentials(user, pw));
        req.client = Some(ip.parse().unwrap());
        req
    }

    #[tokio::test]
    async fn a_client_spraying_usernames_gets_429_with_retry_after_before_any_hash() {
        let auth = auth_limited(RATE);
        let headers = post("application/vnd.ceph.api.v1.0+json");
        for user in ["a", "b", "c"] {
            let refused = auth
                .login(
                    &from(&headers, "192.0.2.1", user, "x"),
                    NOW_MS,
                    &mut AuthSubject::default(),
                )
                .await;
            assert!(matches!(refused, Err(AuthError::InvalidCredentials)));
        }
        let before = hashes(&auth);
        let err = auth
            .login(
                &from(&headers, "192.0.2.1", "admin", "pw"),
                NOW_MS + 500,
                &mut AuthSubject::default(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, AuthError::RateLimited { retry_after: 20 }),
            "{err}"
        );
        assert_eq!(hashes(&auth), before, "no password was hashed");
        // Another client, and this one once a token has refilled, log in.
        assert!(auth
            .login(
                &from(&headers, "192.0.2.2", "admin", "pw"),
                NOW_MS,
                &mut AuthSubject::default()
            )
            .await
            .is_ok());
        assert!(auth
            .login(
                &from(&headers, "192.0.2.1", "admin", "pw"),
                NOW_MS + 20_000,
                &mut AuthSubject::default()
            )
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn logins_that_did_not_fail_take_nothing() {
        let auth = auth_limited(RATE);
        let headers = post("application/vnd.ceph.api.v1.0+json");
        for _ in 0..10 {
            let req = from(&headers, "192.0.2.1", "admin", "pw");
            assert!(auth
                .login(&req, NOW_MS, &mut AuthSubject::default())
                .await
                .is_ok());
        }
        let mut bad_body = request(&headers, "{}");
        bad_body.client = Some("192.0.2.1".parse().unwrap());
        for _ in 0..10 {
            assert!(matches!(
                auth.login(&bad_body, NOW_MS, &mut AuthSubject::default())
                    .await,
                Err(AuthError::BadRequest(_))
            ));
        }
        for user in ["a", "b", "c"] {
            let refused = auth
                .login(
                    &from(&headers, "192.0.2.1", user, "x"),
                    NOW_MS,
                    &mut AuthSubject::default(),
                )
                .await;
            assert!(
                matches!(refused, Err(AuthError::InvalidCredentials)),
                "{user}"
            );
        }
    }

    #[tokio::test]
    async fn the_username_lockout_still_applies_below_the_client_limit() {
        let auth = auth_limited(BucketRate {
            burst: 100,
            refill_ms: 600,
        });
        let headers = post("application/vnd.ceph.api.v1.0+json");
        for i in 0..3 {
            let ip = format!("192.0.2.{i}");
            assert!(auth
                .login(
                    &from(&headers, &ip, "admin", "bad"),
                    NOW_MS,
                    &mut AuthSubject::default()
                )
                .await
                .is_err());
        }
        let locked = auth
            .login(
                &from(&headers, "192.0.2.9", "admin", "pw"),
                NOW_MS,
                &mut AuthSubject::default(),
            )
            .await;
        assert!(matches!(locked, Err(AuthError::InvalidCredentials)));
    }

    #[tokio::test]
    async fn ipv6_clients_share_their_64() {
        let auth = auth_limited(RATE);
        let headers = post("application/vnd.ceph.api.v1.0+json");
        for i in 1..=3 {
            let ip = format!("2001:db8:1:2::{i}");
            assert!(matches!(
                auth.login(
                    &from(&headers, &ip, "x", "x"),
                    NOW_MS,
                    &mut AuthSubject::default()
                )
                .await,
                Err(AuthError::InvalidCredentials)
            ));
        }
        let same_64 = from(&headers, "2001:db8:1:2:ffff::1", "admin", "pw");
        assert!(matches!(
            auth.login(&same_64, NOW_MS, &mut AuthSubject::default())
                .await,
            Err(AuthError::RateLimited { .. })
        ));
        let next_64 = from(&headers, "2001:db8:1:3::1", "admin", "pw");
        assert!(auth
            .login(&next_64, NOW_MS, &mut AuthSubject::default())
            .await
            .is_ok());
    }
}

//! Which kind of request this is, decided once from the path. Every later step (who
//! answers, what is checked, which metric label) matches on [`Route`].

/// The routes the gateway tells apart. Labels are a small fixed set, never raw paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Route {
    /// `POST /api/auth`: served by the gateway.
    Login,
    /// `POST /api/auth/check`: served by the gateway.
    TokenCheck,
    /// `POST /api/auth/logout`: served by the gateway.
    Logout,
    /// `/api/clustergate/keys...`: the API keys' management, served by the gateway.
    Keys,
    /// Any other `/api` or `/ui-api` path: token, role and version checked, then forwarded.
    Api,
    /// `/docs...`: the API description.
    Docs,
    /// `/auth/oidc/...`: the browser's single sign-on, served by the gateway.
    Sso,
    /// Anything else: the dashboard's web UI (its files are forwarded without a token).
    #[default]
    Other,
}

impl Route {
    /// Every route, in declaration order (`self as usize` indexes it).
    pub const ALL: [Route; 8] = [
        Route::Login,
        Route::TokenCheck,
        Route::Logout,
        Route::Keys,
        Route::Api,
        Route::Docs,
        Route::Sso,
        Route::Other,
    ];

    pub fn classify(path: &str) -> Route {
        // The dashboard registers every route with and without a trailing slash.
        let trimmed = match path.strip_suffix('/') {
            Some(p) if !p.is_empty() => p,
            _ => path,
        };
        match trimmed {
            "/api/auth" => Route::Login,
            "/api/auth/check" => Route::TokenCheck,
            "/api/auth/logout" => Route::Logout,
            "/api/clustergate/keys" => Route::Keys,
            p if p.starts_with("/api/clustergate/keys/") => Route::Keys,
            "/api" | "/ui-api" => Route::Api,
            p if p.starts_with("/api/") || p.starts_with("/ui-api/") => Route::Api,
            "/docs" => Route::Docs,
            p if p.starts_with("/docs/") => Route::Docs,
            p if p.starts_with("/auth/oidc/") => Route::Sso,
            _ => Route::Other,
        }
    }

    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Route::Login => "auth",
            Route::TokenCheck => "auth_check",
            Route::Logout => "auth_logout",
            Route::Keys => "api_keys",
            Route::Api => "proxy",
            Route::Docs => "docs",
            Route::Sso => "sso",
            Route::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_each_route_at_its_index() {
        for (i, route) in Route::ALL.into_iter().enumerate() {
            assert_eq!(route as usize, i);
        }
    }

    #[test]
    fn classify_table() {
        let cases = [
            ("/api/auth", Route::Login),
            ("/api/auth/", Route::Login),
            ("/api/auth/check", Route::TokenCheck),
            ("/api/auth/check/", Route::TokenCheck),
            ("/api/auth/logout", Route::Logout),
            ("/api/auth/other", Route::Api),
            ("/api/clustergate/keys", Route::Keys),
            ("/api/clustergate/keys/", Route::Keys),
            ("/api/clustergate/keys/0123/rotate", Route::Keys),
            ("/api/clustergate/keysx", Route::Api),
            ("/api/authx", Route::Api),
            ("/api/pool", Route::Api),
            ("/api", Route::Api),
            ("/apix", Route::Other),
            ("/ui-api/langs", Route::Api),
            ("/ui-api", Route::Api),
            ("/ui-apix", Route::Other),
            ("/docs", Route::Docs),
            ("/docs/api.json", Route::Docs),
            ("/", Route::Other),
            ("", Route::Other),
        ];
        for (path, route) in cases {
            assert_eq!(Route::classify(path), route, "{path}");
        }
    }
}

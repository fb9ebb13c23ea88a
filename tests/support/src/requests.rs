//! Requests to a running gateway (reqwest, or raw HTTP/1.1 bytes) and the `Reply` they give.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Value};

use super::{RunningGateway, V1};

impl RunningGateway {
    pub async fn send(&self, req: reqwest::RequestBuilder) -> Reply {
        Reply::from_reqwest(req.send().await.expect("request to gateway")).await
    }

    /// POST a JSON body with the given Accept (None: the client's default `*/*`).
    pub async fn post_json(&self, path: &str, accept: Option<&str>, body: &Value) -> Reply {
        let mut req = self.client.post(self.url(path)).json(body);
        if let Some(accept) = accept {
            req = req.header("Accept", accept);
        }
        self.send(req).await
    }

    pub async fn try_login(&self, user: &str, password: &str) -> Reply {
        self.post_json(
            "/api/auth",
            Some(V1),
            &json!({"username": user, "password": password}),
        )
        .await
    }

    /// A login relayed as if by a proxy that names the client `forwarded_for`.
    pub async fn try_login_forwarded(
        &self,
        forwarded_for: &str,
        user: &str,
        password: &str,
    ) -> Reply {
        let req = self
            .client
            .post(self.url("/api/auth"))
            .header("Accept", V1)
            .header("X-Forwarded-For", forwarded_for)
            .json(&json!({"username": user, "password": password}));
        self.send(req).await
    }

    /// Log in and return the token; panics unless the gateway answers 201.
    pub async fn login(&self, user: &str, password: &str) -> String {
        let r = self.try_login(user, password).await;
        assert_eq!(r.status, 201, "login {user}: {}\n{}", r.text(), self.logs());
        r.json()["token"]
            .as_str()
            .expect("token in login body")
            .to_string()
    }

    pub async fn check(&self, token: &str) -> Reply {
        self.post_json("/api/auth/check", Some(V1), &json!({ "token": token }))
            .await
    }

    /// Log out with `Authorization: Bearer` and an empty body.
    pub async fn logout(&self, token: &str) -> Reply {
        let req = self
            .logout_request()
            .header("Authorization", format!("Bearer {token}"))
            .body("");
        self.send(req).await
    }

    /// `POST /api/auth/logout` with Accept v1.0, to add credentials and a body to.
    pub fn logout_request(&self) -> reqwest::RequestBuilder {
        self.client
            .post(self.url("/api/auth/logout"))
            .header("Accept", V1)
    }

    /// GET an `/api/...` path with Accept v1.0 and an optional Bearer token.
    pub async fn api_get(&self, path: &str, token: Option<&str>) -> Reply {
        let mut req = self.client.get(self.url(path)).header("Accept", V1);
        if let Some(token) = token {
            req = req.header("Authorization", format!("Bearer {token}"));
        }
        self.send(req).await
    }

    /// The Prometheus text from the metrics listener.
    pub async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.metrics_addr);
        let r = self.send(client_builder().build().unwrap().get(url)).await;
        assert_eq!(r.status, 200, "GET /metrics");
        r.text()
    }

    /// Scrape `/metrics` until `ready` holds (metrics may be recorded just after the response is
    /// sent), at most 10 s; returns the last scrape either way.
    pub async fn metrics_until(&self, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.metrics().await;
            if ready(&text) || Instant::now() > deadline {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A raw HTTP/1.1 request over plain TCP (TLS off only); the caller writes every header.
    pub fn raw(&self, request: &[u8]) -> Reply {
        assert!(!self.spec.tls, "raw requests need tls = false");
        try_raw_http(self.addr, request).expect("raw request")
    }

    /// A raw POST with exactly the given headers (plus Host, Connection: close, Content-Length).
    pub fn raw_post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let mut req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.raw(&bytes)
    }
}

/// A reqwest builder with our defaults: no proxy, no redirects, rustls, a request timeout.
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .use_rustls_tls()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
}

/// A response, from reqwest or from a raw socket.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub version: reqwest::Version,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub async fn from_reqwest(resp: reqwest::Response) -> Self {
        let status = resp.status().as_u16();
        let version = resp.version();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.expect("response body").to_vec();
        Self {
            status,
            version,
            headers,
            body,
        }
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}), status {}: {:?}",
                self.status,
                self.text()
            )
        })
    }
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    }
    pub fn header_all(&self, name: &str) -> Vec<String> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect()
    }
    pub fn content_type(&self) -> String {
        self.header("content-type").unwrap_or_default()
    }
    /// The Set-Cookie header for `token`; panics when there is none.
    pub fn token_cookie(&self) -> String {
        self.header_all("set-cookie")
            .into_iter()
            .find(|c| c.starts_with("token="))
            .unwrap_or_else(|| panic!("no Set-Cookie for token: {:?}", self.headers))
    }
}

/// Send raw bytes and read the whole response (the request should say `Connection: close`).
pub fn try_raw_http(addr: SocketAddr, request: &[u8]) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.write_all(request)?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf)?;
    parse_http1(&buf).ok_or_else(|| {
        std::io::Error::other(format!(
            "unparsable response: {:?}",
            String::from_utf8_lossy(&buf)
        ))
    })
}

pub fn parse_http1(buf: &[u8]) -> Option<Reply> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let mut headers = HeaderMap::new();
    for line in lines {
        let (k, v) = line.split_once(':')?;
        headers.append(
            HeaderName::from_bytes(k.trim().as_bytes()).ok()?,
            HeaderValue::from_str(v.trim()).ok()?,
        );
    }
    let rest = &buf[end + 4..];
    let chunked = headers
        .get("transfer-encoding")
        .is_some_and(|v| v.to_str().unwrap_or("").contains("chunked"));
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(len) = headers.get("content-length") {
        rest.get(..len.to_str().ok()?.parse::<usize>().ok()?)?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Some(Reply {
        status,
        version: reqwest::Version::HTTP_11,
        headers,
        body,
    })
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

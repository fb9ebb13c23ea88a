//! What `clustergate keys` prints: the gateway's answers read into the fields it shows, the
//! list as a table, a new key alone on standard output and what it is on standard error.

use std::fmt::Write;

use serde::Deserialize;

/// A key as the gateway lists it (never its secret).
#[derive(Debug, Deserialize)]
pub struct ListedKey {
    pub id: String,
    pub name: String,
    pub owner: String,
    pub roles: Vec<String>,
    pub expires_at: u64,
    pub last_used: Option<u64>,
}

/// The answer to a creation or a rotation: the one that carries the key.
#[derive(Deserialize)]
pub struct CreatedKey {
    pub key: String,
    pub id: String,
    pub name: String,
    pub owner: String,
    pub roles: Vec<String>,
    pub expires_at: u64,
    #[serde(default)]
    pub networks: Vec<String>,
}

// By hand: the derived one would print the key.
impl std::fmt::Debug for CreatedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedKey")
            .field("id", &self.id)
            .field("key", &"[redacted]")
            .finish_non_exhaustive()
    }
}

/// The columns of `keys list`, in order.
const HEADINGS: [&str; 6] = ["ID", "NAME", "OWNER", "ROLES", "EXPIRES", "LAST USED"];

/// `keys` as a table, one line each, columns as wide as their widest cell; `now` marks
/// the expired ones (still listed until they are removed).
pub fn table(keys: &[ListedKey], now: u64) -> String {
    if keys.is_empty() {
        return "no API keys\n".to_string();
    }
    let rows: Vec<[String; 6]> = keys.iter().map(|key| row(key, now)).collect();
    let mut widths = HEADINGS.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    line(&mut out, &HEADINGS.map(str::to_string), &widths);
    for row in &rows {
        line(&mut out, row, &widths);
    }
    out
}

fn row(key: &ListedKey, now: u64) -> [String; 6] {
    let expires = match key.expires_at <= now {
        true => format!("{} (expired)", utc(key.expires_at)),
        false => utc(key.expires_at),
    };
    [
        key.id.clone(),
        key.name.clone(),
        key.owner.clone(),
        key.roles.join(","),
        expires,
        key.last_used.map_or_else(|| "never".to_string(), utc),
    ]
}

fn line(out: &mut String, cells: &[String; 6], widths: &[usize; 6]) {
    let mut text = String::new();
    for (cell, width) in cells.iter().zip(widths) {
        let _ = write!(text, "{cell:<width$}  ");
    }
    out.push_str(text.trim_end());
    out.push('\n');
}

/// What is said of a new key on standard error (its key goes alone to standard output).
pub fn created(key: &CreatedKey, verb: &str) -> String {
    let networks = match key.networks.is_empty() {
        true => "any address".to_string(),
        false => key.networks.join(", "),
    };
    format!(
        "{verb} API key {} ({:?}) of {}, roles {}, expires {}, accepted from {networks}.\n\
         The key is shown only this once; the gateway keeps its digest, not the key.\n",
        key.id,
        key.name,
        key.owner,
        key.roles.join(","),
        utc(key.expires_at),
    )
}

/// A Unix time as `2026-11-28 17:10 UTC`.
pub fn utc(seconds: u64) -> String {
    let at = i64::try_from(seconds)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok());
    match at {
        Some(at) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02} UTC",
            at.year(),
            u8::from(at.month()),
            at.day(),
            at.hour(),
            at.minute()
        ),
        None => format!("{seconds} (Unix time)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_795_885_200; // 2026-11-28 17:00 UTC

    fn listed(json: &str) -> Vec<ListedKey> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn the_list_is_a_table_of_the_gateways_answer() {
        let keys = listed(
            r#"[{"id": "0123456789abcdef", "name": "prometheus-exporter", "owner": "monitor",
                 "created_by": "admin", "roles": ["read-only"], "created_at": 1795000000,
                 "expires_at": 1797477200, "networks": ["10.0.0.0/8"], "last_used": 1795884960},
                {"id": "fedcba9876543210", "name": "ci", "owner": "admin", "created_by": "admin",
                 "roles": ["block-manager", "pool-manager"], "created_at": 1795000000,
                 "expires_at": 1795881600, "networks": [], "last_used": null}]"#,
        );
        let expected = "\
ID                NAME                 OWNER    ROLES                       EXPIRES                         LAST USED
0123456789abcdef  prometheus-exporter  monitor  read-only                   2026-12-17 03:13 UTC            2026-11-28 16:56 UTC
fedcba9876543210  ci                   admin    block-manager,pool-manager  2026-11-28 16:00 UTC (expired)  never
";
        assert_eq!(table(&keys, NOW), expected);
    }

    #[test]
    fn an_empty_list_says_so() {
        assert_eq!(table(&[], NOW), "no API keys\n");
    }

    #[test]
    fn a_new_key_is_described_without_its_secret() {
        let key: CreatedKey = serde_json::from_str(
            r#"{"key": "cgk_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                "id": "0123456789abcdef", "name": "ci", "owner": "bob", "created_by": "admin",
                "roles": ["read-only"], "created_at": 1795885200, "expires_at": 1798477200,
                "networks": ["10.0.0.0/8"]}"#,
        )
        .unwrap();
        let text = created(&key, "Created");
        assert!(
            text.starts_with("Created API key 0123456789abcdef (\"ci\") of bob, roles read-only, expires 2026-12-28 17:00 UTC, accepted from 10.0.0.0/8."),
            "{text}"
        );
        assert!(!text.contains("AAAA") && !format!("{key:?}").contains("AAAA"));
    }

    #[test]
    fn a_time_out_of_range_is_shown_as_a_number() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(u64::MAX), "18446744073709551615 (Unix time)");
    }
}

//! `[api_keys]` read from the file: its settings, its problems named `file: key: message`.

use super::*;
use std::time::Duration;

#[test]
fn the_api_keys_section_is_read_from_the_file() {
    let d = dir();
    let text = "[api_keys]\nmax_keys = 50\nmax_lifetime_days = 7\nrate_per_second = 5\nburst = 5\n";
    let c = parse(text, d.path()).unwrap();
    assert_eq!(
        c.api_keys,
        ApiKeysConfig {
            max_keys: 50,
            max_lifetime: Duration::from_secs(7 * 24 * 3600),
            rate_per_second: 5,
            burst: 5,
        }
    );
    assert_eq!(
        parse("", d.path()).unwrap().api_keys,
        ApiKeysConfig::default()
    );
}

#[test]
fn api_keys_problems_name_the_file_and_the_key() {
    let e = errors_of("[api_keys]\nmax_keys = 0\nrate_per_second = 50\nlifetime = 3\n");
    let text = e.to_string();
    assert!(
        text.contains("clustergate.toml: api_keys.max_keys: 0 is out of range: 1 to 1000000"),
        "{text}"
    );
    // The default burst (40) is under the rate now asked for.
    assert!(
        text.contains("clustergate.toml: api_keys.burst: 40 is less than"),
        "{text}"
    );
    assert!(e.mentions("api_keys.lifetime"), "{text}");
}

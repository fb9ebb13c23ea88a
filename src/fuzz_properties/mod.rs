//! Fuzzed parsers (issue 15, item 6): bounded property harnesses, run by `cargo test` on
//! the stable toolchain, for everything that parses what a client or an operator writes:
//! the Accept header (`accept`), API keys (`api_keys`), request paths (`paths`), tokens (`tokens`), the login
//! and token-check bodies (`auth_bodies`), the configuration (`config`) and single
//! sign-on's claim paths, provider URLs and issuer peek (`oidc`).
//!
//! Each harness feeds its parser three kinds of input: a corpus of realistic inputs
//! mutated by [`mutate`], inputs generated from the parser's grammar (checked against a
//! model of the answer where one is simple), and arbitrary text. Each property runs a
//! fixed number of cases ([`cases`]); `PROPTEST_CASES=20000 cargo test --lib
//! fuzz_properties` runs a longer campaign, and `PROPTEST_RNG_SEED` repeats a run. A
//! failing case is shrunk, printed, and its seed saved under `proptest-regressions/`
//! (commit that file: the case is then replayed first on every run).

mod accept;
mod api_keys;
mod auth_bodies;
mod config;
mod mutate;
mod oidc;
mod paths;
mod tokens;

use proptest::test_runner::Config;

/// `n` cases per property, unless `PROPTEST_CASES` asks for another number.
fn cases(n: u32) -> Config {
    let config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_some() {
        config
    } else {
        Config { cases: n, ..config }
    }
}

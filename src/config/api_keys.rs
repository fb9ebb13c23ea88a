//! `[api_keys]`: how many API keys the gateway keeps (`max_keys`), the longest lifetime a
//! key may be given (`max_lifetime_days`), and each key's rate limit (`rate_per_second`,
//! `burst`).

use std::time::Duration;

use super::file::ApiKeysSection;
use super::parse::Source;
use super::ConfigErrors;

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeysConfig {
    /// The keys the stores keep at most (everyone's together); past it a creation is
    /// refused.
    pub max_keys: usize,
    /// The longest `expires_in_seconds` a key may be created with.
    pub max_lifetime: Duration,
    /// Requests per second each key may make, on average.
    pub rate_per_second: u32,
    /// Requests a key may make at once after a quiet moment (at least `rate_per_second`).
    pub burst: u32,
}

impl Default for ApiKeysConfig {
    fn default() -> Self {
        Source::defaults(validate)
    }
}

pub(super) fn validate(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    section: ApiKeysSection,
) -> ApiKeysConfig {
    let f = at.file;
    let mut bounded = |key: &str, value: u64, low: u64, high: u64| {
        if !(low..=high).contains(&value) {
            errors.push(
                f,
                format!("api_keys.{key}"),
                format!("{value} is out of range: {low} to {high}"),
            );
        }
    };
    bounded("max_keys", section.max_keys as u64, 1, 1_000_000);
    bounded("max_lifetime_days", section.max_lifetime_days, 1, 3650);
    bounded(
        "rate_per_second",
        section.rate_per_second.into(),
        1,
        100_000,
    );
    if section.burst < section.rate_per_second {
        errors.push(
            f,
            "api_keys.burst",
            format!(
                "{} is less than api_keys.rate_per_second ({}): a key could never use its rate; raise burst to at least rate_per_second",
                section.burst, section.rate_per_second
            ),
        );
    }
    ApiKeysConfig {
        max_keys: section.max_keys,
        max_lifetime: DAY
            .saturating_mul(u32::try_from(section.max_lifetime_days).unwrap_or(u32::MAX)),
        rate_per_second: section.rate_per_second,
        burst: section.burst,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn check(section: ApiKeysSection) -> (ApiKeysConfig, ConfigErrors) {
        let mut errors = ConfigErrors::default();
        let at = Source {
            file: Path::new("gw.toml"),
            dir: Path::new("."),
        };
        (validate(&mut errors, &at, section), errors)
    }

    #[test]
    fn defaults_are_ten_thousand_keys_of_ninety_days_at_twenty_per_second() {
        let (config, errors) = check(ApiKeysSection::default());
        assert!(errors.is_empty(), "{errors}");
        assert_eq!(
            config,
            ApiKeysConfig {
                max_keys: 10_000,
                max_lifetime: DAY * 90,
                rate_per_second: 20,
                burst: 40,
            }
        );
        assert_eq!(ApiKeysConfig::default(), config);
    }

    #[test]
    fn every_problem_is_named_at_once() {
        let section = ApiKeysSection {
            max_keys: 0,
            max_lifetime_days: 3651,
            rate_per_second: 100_001,
            burst: 5,
        };
        let (_, errors) = check(section);
        for key in [
            "api_keys.max_keys",
            "api_keys.max_lifetime_days",
            "api_keys.rate_per_second",
            "api_keys.burst",
        ] {
            assert!(errors.mentions(key), "{key}: {errors}");
        }
    }

    #[test]
    fn the_largest_values_are_accepted() {
        let section = ApiKeysSection {
            max_keys: 1_000_000,
            max_lifetime_days: 3650,
            rate_per_second: 100_000,
            burst: 100_000,
        };
        let (config, errors) = check(section);
        assert!(errors.is_empty(), "{errors}");
        assert_eq!(config.max_lifetime, DAY * 3650);
    }
}

//! Configurations that load, with one value replaced by a value of any type or removed:
//! this reaches past the TOML syntax into every section's validation. The configuration
//! loads, or each problem points at what changed: the key itself (or a key under it, or
//! the section it is in), a message that names it or the new value, or the file it names.

use proptest::prelude::*;
use proptest::sample::Index;

use super::documents::{SIGNING_KEYS, VALUES};
use super::{check_report, valid_seeds, with_fixture};
use crate::fuzz_properties::cases;

/// One value of a seed replaced (`Some`, a TOML value) or removed (`None`).
#[derive(Debug, Clone)]
struct Change {
    seed: Index,
    leaf: Index,
    replacement: Option<&'static str>,
}

/// The paths of a table's values that are not tables themselves.
fn leaves(table: &toml::Table) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for (key, value) in table {
        match value.as_table() {
            Some(inner) => paths.extend(leaves(inner).into_iter().map(|mut path| {
                path.insert(0, key.clone());
                path
            })),
            None => paths.push(vec![key.clone()]),
        }
    }
    paths
}

impl Change {
    /// The changed document, and the dotted path of the value changed.
    fn apply(&self, seeds: &[toml::Table]) -> (String, Vec<String>) {
        let mut table = self.seed.get(seeds).clone();
        let paths = leaves(&table);
        let path = self.leaf.get(&paths).clone();
        let (last, parents) = path.split_last().expect("a leaf has a name");
        let mut at = &mut table;
        for parent in parents {
            at = at
                .get_mut(parent)
                .and_then(toml::Value::as_table_mut)
                .expect("the leaf's tables");
        }
        match self.replacement {
            Some(text) => {
                let value: toml::Table = format!("v = {text}").parse().expect("a TOML value");
                at.insert(last.clone(), value["v"].clone());
            }
            None => {
                at.remove(last);
            }
        }
        (toml::to_string(&table).expect("a table renders"), path)
    }
}

/// Seeds that load, as tables (each has at least one value).
fn seed_tables() -> &'static [toml::Table] {
    static TABLES: std::sync::OnceLock<Vec<toml::Table>> = std::sync::OnceLock::new();
    TABLES.get_or_init(|| {
        valid_seeds()
            .iter()
            .map(|seed| seed.parse::<toml::Table>().expect("a seed parses"))
            .filter(|table| !leaves(table).is_empty())
            .collect()
    })
}

fn change() -> impl Strategy<Value = Change> {
    use prop::sample::select;
    let replacement = prop_oneof![
        6 => select(VALUES).prop_map(Some),
        1 => select(SIGNING_KEYS).prop_map(Some),
        1 => Just(None),
    ];
    (any::<Index>(), any::<Index>(), replacement).prop_map(|(seed, leaf, replacement)| Change {
        seed,
        leaf,
        replacement,
    })
}

/// Whether `key` (a problem's) is `changed`, under it, or the section it is in.
fn on_path(key: &str, changed: &str) -> bool {
    let under = |outer: &str, inner: &str| {
        inner == outer
            || inner.starts_with(&format!("{outer}."))
            || inner.starts_with(&format!("{outer}["))
    };
    under(changed, key) || under(key, changed)
}

proptest! {
    #![proptest_config(cases(1000))]

    #[test]
    fn a_changed_value_loads_or_its_problems_point_at_it(change in change()) {
        with_fixture(|f| {
            let (text, path) = change.apply(seed_tables());
            let Some(errors) = check_report(f, &text)? else {
                return Ok(());
            };
            let changed = path.join(".");
            let name = path.last().map_or(String::new(), |name| name.to_lowercase());
            let value = change.replacement.unwrap_or_default().trim_matches('"');
            for e in &errors.0 {
                prop_assert!(
                    e.file != f.source
                        || on_path(&e.key, &changed)
                        || e.message.to_lowercase().contains(&name)
                        || (!value.is_empty() && e.message.contains(value)),
                    "{} does not point at {} changed to {:?} in:\n{}", e, changed, change.replacement, text
                );
            }
            Ok(())
        })?;
    }
}

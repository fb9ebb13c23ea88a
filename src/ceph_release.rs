//! A Ceph release (`major.minor`, e.g. 18.2 for Reef): which operation table applies to a
//! manager. Read from the tables' `ceph_version`, `access.release` and what a manager says
//! it runs (`ceph version 18.2.7 (…) reef (stable)`).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CephRelease {
    pub major: u16,
    pub minor: u16,
}

impl CephRelease {
    /// `18.2`, `18.2.7`, `18.2.7-1` …: the first two numbers.
    pub fn parse(text: &str) -> Option<CephRelease> {
        let mut numbers = text.trim().split(['.', '-', '+', ' ']);
        let major = numbers.next()?.parse().ok()?;
        let minor = numbers.next()?.parse().ok()?;
        Some(CephRelease { major, minor })
    }

    /// What `ceph version` prints, as the dashboard's summary carries it:
    /// `ceph version 18.2.7 (hash) reef (stable)`.
    pub fn from_version_line(line: &str) -> Option<CephRelease> {
        let rest = line.trim().strip_prefix("ceph version ")?;
        CephRelease::parse(rest.split(' ').next()?)
    }

    /// Packed into one number (`0` is never a release: Ceph's majors start at 0.x but no
    /// dashboard runs there), so that a manager's release can sit in an atomic.
    pub fn packed(self) -> u32 {
        (u32::from(self.major) << 16) | u32::from(self.minor)
    }

    pub fn unpacked(packed: u32) -> Option<CephRelease> {
        (packed != 0).then_some(CephRelease {
            major: (packed >> 16) as u16,
            minor: (packed & 0xffff) as u16,
        })
    }
}

impl fmt::Display for CephRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_are_read_from_versions_and_version_lines() {
        let reef = CephRelease {
            major: 18,
            minor: 2,
        };
        assert_eq!(CephRelease::parse("18.2"), Some(reef));
        assert_eq!(CephRelease::parse("18.2.7"), Some(reef));
        assert_eq!(
            CephRelease::from_version_line(
                "ceph version 18.2.7 (6b0e988052ec84cf2d4a54ff9bbbc5e720b621ad) reef (stable)"
            ),
            Some(reef)
        );
        assert_eq!(
            CephRelease::from_version_line("ceph version 20.2.4-1 (x)").map(|r| r.to_string()),
            Some("20.2".into())
        );
        for bad in ["", "18", "x.2", "reef", "version 18.2.7"] {
            assert_eq!(CephRelease::from_version_line(bad), None, "{bad}");
        }
        assert_eq!(CephRelease::unpacked(reef.packed()), Some(reef));
        assert_eq!(CephRelease::unpacked(0), None);
        assert!(CephRelease::parse("16.2").unwrap() < reef);
    }
}

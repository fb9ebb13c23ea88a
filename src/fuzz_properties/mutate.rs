//! The mutation engine the harnesses share: a seed from a target's corpus, edited a few
//! times the way libFuzzer edits its inputs (bytes inserted, overwritten, removed or
//! copied, words of the target's dictionary inserted, runs of other seeds spliced in).
//! The edits are proptest values, so a failure shrinks to its seed and fewest edits.

use bytes::Bytes;
use proptest::prelude::*;
use proptest::sample::Index;

/// At most this many edits per input: enough to break a structure in several places,
/// few enough that the input still resembles its seed.
const MAX_EDITS: usize = 6;

/// The longest run one edit removes, copies or splices.
const MAX_RUN: usize = 48;

/// Realistic inputs of one parser, and the words that mean something to it.
pub struct Corpus {
    pub seeds: Vec<Vec<u8>>,
    pub dictionary: &'static [&'static str],
}

impl Corpus {
    pub fn new(
        seeds: impl IntoIterator<Item = impl Into<Vec<u8>>>,
        dictionary: &'static [&'static str],
    ) -> Self {
        let seeds: Vec<Vec<u8>> = seeds.into_iter().map(Into::into).collect();
        assert!(!seeds.is_empty(), "a corpus needs seeds");
        Corpus { seeds, dictionary }
    }

    /// Seeds with 0 to [`MAX_EDITS`] edits each (0: the seed itself).
    pub fn mutants(self) -> impl Strategy<Value = Mutant> {
        let Corpus { seeds, dictionary } = self;
        (any::<Index>(), prop::collection::vec(edit(), 0..=MAX_EDITS)).prop_map(
            move |(seed, edits)| {
                let seed = seed.index(seeds.len());
                let mut input = seeds[seed].clone();
                for edit in &edits {
                    edit.apply(&mut input, &seeds, dictionary);
                }
                Mutant {
                    seed,
                    original: Bytes::from(seeds[seed].clone()),
                    input: Bytes::from(input),
                }
            },
        )
    }
}

/// One generated input and the seed it was made from.
#[derive(Debug, Clone)]
pub struct Mutant {
    pub seed: usize,
    pub original: Bytes,
    pub input: Bytes,
}

impl Mutant {
    /// The input as text (invalid UTF-8 replaced by U+FFFD), for parsers of `&str`.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.input).into_owned()
    }
}

#[derive(Debug, Clone)]
enum Edit {
    InsertByte(Index, u8),
    InsertWord(Index, Index),
    ReplaceByte(Index, u8),
    Remove(Index, usize),
    /// Copies a run of the input to another place in it.
    Duplicate(Index, usize, Index),
    /// Inserts a run of another seed.
    Splice(Index, Index, usize, Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    let run = 1..=MAX_RUN;
    prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(at, b)| Edit::InsertByte(at, b)),
        (any::<Index>(), any::<Index>()).prop_map(|(at, w)| Edit::InsertWord(at, w)),
        (any::<Index>(), any::<u8>()).prop_map(|(at, b)| Edit::ReplaceByte(at, b)),
        (any::<Index>(), run.clone()).prop_map(|(at, n)| Edit::Remove(at, n)),
        (any::<Index>(), run.clone(), any::<Index>())
            .prop_map(|(from, n, to)| Edit::Duplicate(from, n, to)),
        (any::<Index>(), any::<Index>(), run, any::<Index>())
            .prop_map(|(seed, from, n, to)| Edit::Splice(seed, from, n, to)),
    ]
}

impl Edit {
    fn apply(&self, input: &mut Vec<u8>, seeds: &[Vec<u8>], dictionary: &[&str]) {
        // Positions between bytes (0..=len) for insertions, at bytes (0..len) otherwise.
        let gap = |at: &Index, input: &Vec<u8>| at.index(input.len() + 1);
        match self {
            Edit::InsertByte(at, b) => {
                let at = gap(at, input);
                input.insert(at, *b);
            }
            Edit::InsertWord(at, word) if !dictionary.is_empty() => {
                let at = gap(at, input);
                let word = word.get(dictionary).as_bytes();
                input.splice(at..at, word.iter().copied());
            }
            Edit::InsertWord(..) => {}
            Edit::ReplaceByte(at, b) if !input.is_empty() => {
                let at = at.index(input.len());
                input[at] = *b;
            }
            Edit::Remove(at, n) if !input.is_empty() => {
                let at = at.index(input.len());
                let end = (at + n).min(input.len());
                input.drain(at..end);
            }
            Edit::Duplicate(from, n, to) if !input.is_empty() => {
                let run = run_of(input, from, *n).to_vec();
                let to = gap(to, input);
                input.splice(to..to, run);
            }
            Edit::Splice(seed, from, n, to) => {
                let other = seed.get(seeds);
                if !other.is_empty() {
                    let run = run_of(other, from, *n);
                    let to = gap(to, input);
                    input.splice(to..to, run.iter().copied());
                }
            }
            Edit::ReplaceByte(..) | Edit::Remove(..) | Edit::Duplicate(..) => {}
        }
    }
}

/// Up to `n` bytes of `bytes` (not empty) from the position `from` picks.
fn run_of<'a>(bytes: &'a [u8], from: &Index, n: usize) -> &'a [u8] {
    let from = from.index(bytes.len());
    &bytes[from..(from + n).min(bytes.len())]
}

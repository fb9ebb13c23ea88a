//! A place on the dashboard is given back when the dashboard's answer has been read, not
//! when the client has taken it. pingora streams an answer: it reads the next piece from the
//! dashboard only when the client has taken the ones before (a pipe of a few pieces), so a
//! client that never reads would keep the dashboard's connection, and with it the place,
//! for as long as it stays connected. Here the answer is read whole into memory instead, up
//! to `upstream.answer_buffer_bytes`, and sent in one piece at its end: the place goes at
//! the end of the dashboard's answer, and the client's write is bounded on its own (the
//! client connections' write deadline and minimum send rate).
//!
//! What the answers held take together is bounded (`upstream.answer_buffers_total_bytes`):
//! an answer that does not fit, or is larger than one answer's bound, is streamed from
//! there on as pingora does (holding its place until its client has taken it, which the
//! write bounds end). The memory an answer took stays counted until its request ends,
//! since pingora writes from it until then.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::config::AnswerBufferLimits;

/// The budget shared by every answer being held.
#[derive(Debug)]
pub struct AnswerBuffers {
    limits: AnswerBufferLimits,
    held: AtomicUsize,
}

impl AnswerBuffers {
    pub fn new(limits: AnswerBufferLimits) -> Arc<AnswerBuffers> {
        Arc::new(AnswerBuffers {
            limits,
            held: AtomicUsize::new(0),
        })
    }

    /// Bytes the answers of the requests in progress hold now.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Counts `bytes` more, unless the total would pass its bound.
    fn reserve(&self, bytes: usize) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes)
                    .filter(|total| *total <= self.limits.total)
            })
            .is_ok()
    }
}

/// One answer on its way from the dashboard to the client.
#[derive(Debug)]
pub struct HeldAnswer {
    buffers: Arc<AnswerBuffers>,
    /// The pieces read so far, while the answer is held.
    pieces: Vec<Bytes>,
    /// Bytes this answer counts in the budget (given back when dropped).
    reserved: usize,
    /// Past a bound: every piece goes to the client as it comes.
    streaming: bool,
}

impl HeldAnswer {
    pub fn new(buffers: &Arc<AnswerBuffers>) -> HeldAnswer {
        HeldAnswer {
            buffers: buffers.clone(),
            pieces: Vec::new(),
            reserved: 0,
            streaming: false,
        }
    }

    /// Takes the next `piece` of the answer (`end`: the last). What the client gets now:
    /// nothing while the answer is held, the whole answer at its end; once a bound is
    /// passed, what was held with this piece, then each piece as it comes.
    pub fn take(&mut self, piece: Option<Bytes>, end: bool) -> Option<Bytes> {
        if self.streaming {
            return piece;
        }
        if let Some(piece) = piece.filter(|p| !p.is_empty()) {
            if !self.hold(piece.len()) {
                self.streaming = true;
                self.pieces.push(piece);
                return self.joined();
            }
            self.pieces.push(piece);
        }
        if end {
            return self.joined();
        }
        None
    }

    /// Counts `bytes` more for this answer, within its bound and the budget.
    fn hold(&mut self, bytes: usize) -> bool {
        let after = self.reserved.saturating_add(bytes);
        if after > self.buffers.limits.per_answer || !self.buffers.reserve(bytes) {
            return false;
        }
        self.reserved = after;
        true
    }

    /// The pieces held, in one; `None` when there are none.
    fn joined(&mut self) -> Option<Bytes> {
        if self.pieces.len() <= 1 {
            return self.pieces.pop();
        }
        let length = self.pieces.iter().map(Bytes::len).sum();
        let mut whole = BytesMut::with_capacity(length);
        for piece in self.pieces.drain(..) {
            whole.extend_from_slice(&piece);
        }
        Some(whole.freeze())
    }
}

impl Drop for HeldAnswer {
    fn drop(&mut self) {
        self.buffers.held.fetch_sub(self.reserved, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffers(per_answer: usize, total: usize) -> Arc<AnswerBuffers> {
        AnswerBuffers::new(AnswerBufferLimits { per_answer, total })
    }

    fn piece(text: &str) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(text.as_bytes()))
    }

    #[test]
    fn an_answer_within_its_bound_is_held_and_sent_whole_at_its_end() {
        let buffers = buffers(10, 100);
        let mut answer = HeldAnswer::new(&buffers);
        assert_eq!(answer.take(piece("abc"), false), None);
        assert_eq!(answer.take(None, false), None);
        assert_eq!(answer.take(piece("def"), false), None);
        assert_eq!(buffers.held(), 6);
        assert_eq!(answer.take(piece("g"), true), piece("abcdefg"));
        assert_eq!(buffers.held(), 7, "counted until the request ends");
        drop(answer);
        assert_eq!(buffers.held(), 0);
    }

    #[test]
    fn an_empty_end_gives_what_was_held() {
        let buffers = buffers(10, 100);
        let mut answer = HeldAnswer::new(&buffers);
        assert_eq!(answer.take(piece("abc"), false), None);
        assert_eq!(answer.take(None, true), piece("abc"));
        let mut empty = HeldAnswer::new(&buffers);
        assert_eq!(empty.take(None, true), None);
    }

    #[test]
    fn past_its_bound_an_answer_is_streamed_from_there_on() {
        let buffers = buffers(4, 100);
        let mut answer = HeldAnswer::new(&buffers);
        assert_eq!(answer.take(piece("abc"), false), None);
        assert_eq!(answer.take(piece("de"), false), piece("abcde"));
        assert_eq!(answer.take(piece("f"), false), piece("f"));
        assert_eq!(answer.take(None, true), None);
        assert_eq!(buffers.held(), 3);
    }

    #[test]
    fn the_budget_bounds_all_answers_together() {
        let buffers = buffers(4, 6);
        let mut first = HeldAnswer::new(&buffers);
        let mut second = HeldAnswer::new(&buffers);
        assert_eq!(first.take(piece("abcd"), false), None);
        assert_eq!(second.take(piece("ef"), false), None);
        assert_eq!(second.take(piece("g"), false), piece("efg"), "no room left");
        assert_eq!(buffers.held(), 6);
        drop(first);
        let mut third = HeldAnswer::new(&buffers);
        assert_eq!(third.take(piece("hij"), true), piece("hij"));
        assert_eq!(buffers.held(), 5);
    }

    #[test]
    fn no_buffer_streams_every_answer() {
        let buffers = buffers(0, 0);
        let mut answer = HeldAnswer::new(&buffers);
        assert_eq!(answer.take(piece("abc"), false), piece("abc"));
        assert_eq!(answer.take(None, true), None);
    }
}

//! Status words: words of device-visible host memory a library writes its
//! result into (a factorization's `info`, DESIGN "Numerical libraries and foreign work"), read by the host after a
//! wait: pages of mapped page-locked memory, allocated once and reused, so
//! a task's factorization allocates nothing (a page-locked allocation would
//! order other streams' work, and its free waits for them).

use crate::driver::Driver;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::Arc;

/// Words per page: one 4 KiB page of `i32`s.
const WORDS: usize = 1024;

/// A runtime's pages of words and which are free.
#[derive(Debug, Default)]
pub(crate) struct StatusWords {
    inner: Arc<Mutex<Pages>>,
}

#[derive(Debug, Default)]
struct Pages {
    /// (host address, device address) of each page.
    pages: Vec<(usize, u64)>,
    /// Free words: (page, index).
    free: Vec<(usize, usize)>,
    /// Blocks for runs of words (a batched call's results): (host
    /// address, device address, words), `words` a power of two of at
    /// least a page's.
    blocks: Vec<(usize, u64, usize)>,
    /// Free blocks, by index into `blocks`.
    free_blocks: Vec<usize>,
}

/// Where a word or run lives, to give it back.
#[derive(Debug, Clone, Copy)]
enum At {
    /// Word `.1` of page `.0`.
    Word(usize, usize),
    /// Block `.0`, whole.
    Block(usize),
}

/// Turns a nonzero value of a [`StatusWord`] written by `op` into its error
/// ([`TaskContext::check_status_later`](crate::TaskContext::check_status_later)):
/// a library's meaning of its status (cuSOLVER's positive `info` of a
/// potrf is [`Error::NotPositiveDefinite`], a negative one
/// [`Error::Library`]).
pub type StatusJudge = fn(op: &'static str, value: i32) -> Error;

/// A status word: one `i32` of mapped page-locked host memory, zeroed,
/// that a library's device work writes its result into (cuSOLVER's
/// `info`), and that the runtime reads after a wait; or a run of
/// [`StatusWord::len`] such words, one per problem of a batched call
/// ([`TaskContext::status_words`](crate::TaskContext::status_words)). Made by
/// [`TaskContext::status_word`](crate::TaskContext::status_word), handed
/// to [`TaskContext::check_status_later`](crate::TaskContext::check_status_later),
/// which reads it at the task's next host wait (DESIGN "Where a failure
/// goes").
///
/// The word goes back to its runtime's free list when dropped (by the
/// check, after the wait that covers its writer; or unused, if no work
/// that writes it was queued). A word whose wait failed is never given
/// back, so the device never writes a word that someone else holds.
#[derive(Debug)]
pub struct StatusWord {
    host: *mut i32,
    dev: u64,
    /// Words in the run (1 for a single word).
    len: usize,
    /// The id of the runtime whose pages hold it: a check reads it only
    /// in a task of that runtime, which keeps the pages alive.
    runtime: u64,
    at: At,
    pages: Arc<Mutex<Pages>>,
}

// SAFETY: the word is plain memory; its one writer is ordered by the
// caller's waits, and it is read only after them.
unsafe impl Send for StatusWord {}
// SAFETY: as for `Send`: `&StatusWord` only reads the word (`get`), after
// the waits that order its writer.
unsafe impl Sync for StatusWord {}

impl StatusWord {
    /// The id of the runtime the word belongs to.
    pub(crate) fn runtime_id(&self) -> u64 {
        self.runtime
    }

    /// The device address of the word, or of the run's first (an `int*`
    /// for the library's call), valid while the word lives.
    pub fn device_ptr(&self) -> u64 {
        self.dev
    }

    /// The host address of the same word (of the run's first), what a
    /// host twin writes (with volatile writes) in the device's place. Valid while the word lives;
    /// written by nothing but the one operation the word was made for.
    pub fn host_ptr(&self) -> *mut i32 {
        self.host
    }

    /// The number of words: 1, or the run's length.
    #[allow(clippy::len_without_is_empty)] // never empty
    pub fn len(&self) -> usize {
        self.len
    }

    /// The nonzero values with their indices in the run, in order. Only
    /// after a wait that covers the work writing them.
    pub(crate) fn nonzero(&self) -> Vec<(usize, i32)> {
        (0..self.len)
            .map(|i| (i, self.get(i)))
            .filter(|&(_, v)| v != 0)
            .collect()
    }

    /// The value of word `i` (`< len`).
    fn get(&self, i: usize) -> i32 {
        debug_assert!(i < self.len);
        // SAFETY: a live word of a page that lives while its runtime does:
        // pages are freed only by the runtime's drop, and every word is held
        // by a check kept in its task (which holds the runtime) or with the
        // fence of its work (which holds it, and which `fence::conclude`
        // keeps until the word is read: reading after that fence's last
        // clone went freed the page, seen with another device's runtime).
        // `i < len` words of the run are the word's own. Volatile, as the
        // device wrote it behind the compiler's back.
        unsafe { self.host.add(i).read_volatile() }
    }
}

impl Drop for StatusWord {
    fn drop(&mut self) {
        let mut p = self.pages.lock();
        match self.at {
            At::Word(page, i) => p.free.push((page, i)),
            At::Block(b) => p.free_blocks.push(b),
        }
    }
}

impl StatusWords {
    /// A free word, set to zero (a new page of them if none is free).
    pub(crate) fn take(&self, driver: &dyn Driver, runtime: u64) -> Result<StatusWord> {
        let mut p = self.inner.lock();
        if p.free.is_empty() {
            let (host, dev) = driver.alloc_host(WORDS * 4, true)?;
            let page = p.pages.len();
            p.pages.push((host as usize, dev));
            p.free.extend((0..WORDS).rev().map(|i| (page, i)));
        }
        let (page, i) = p.free.pop().expect("a page of free words was just added");
        let (host, dev) = p.pages[page];
        let host = (host as *mut i32).wrapping_add(i);
        // SAFETY: a free word of a live page, with no other holder: a word
        // goes back to the free list only when its check is dropped after a
        // successful wait that covers its writer (a word whose wait failed
        // is leaked, `fence/checks.rs`), or before any work that writes it was
        // queued.
        unsafe { host.write_volatile(0) };
        Ok(StatusWord {
            host,
            dev: dev + 4 * i as u64,
            len: 1,
            runtime,
            at: At::Word(page, i),
            pages: self.inner.clone(),
        })
    }

    /// A run of `len` free words, each zero: a single word for `len <= 1`,
    /// otherwise a block of its own (a power of two of words, at least a
    /// page), reused by later runs of its size class.
    pub(crate) fn take_run(
        &self,
        driver: &dyn Driver,
        runtime: u64,
        len: usize,
    ) -> Result<StatusWord> {
        if len <= 1 {
            return self.take(driver, runtime);
        }
        let words = len
            .checked_next_power_of_two()
            .filter(|w| *w <= i32::MAX as usize / 4)
            .ok_or(Error::TooLarge {
                elements: len,
                element_bytes: 4,
                during: "taking status words for a batch",
            })?
            .max(WORDS);
        let mut p = self.inner.lock();
        let found = p.free_blocks.iter().position(|&b| p.blocks[b].2 == words);
        let b = match found {
            Some(at) => p.free_blocks.swap_remove(at),
            None => {
                let (host, dev) = driver.alloc_host(words * 4, true)?;
                p.blocks.push((host as usize, dev, words));
                p.blocks.len() - 1
            }
        };
        let (host, dev, _) = p.blocks[b];
        let host = host as *mut i32;
        for i in 0..len {
            // SAFETY: a free block of `words >= len` words with no other
            // holder (as for a single word in `take`).
            unsafe { host.add(i).write_volatile(0) };
        }
        Ok(StatusWord {
            host,
            dev,
            len,
            runtime,
            at: At::Block(b),
            pages: self.inner.clone(),
        })
    }

    /// Frees every page. Only from the runtime's drop, once every stream
    /// finished (no word is written any more).
    pub(crate) fn free_all(&self, driver: &dyn Driver) {
        let mut p = self.inner.lock();
        let pages = std::mem::take(&mut p.pages)
            .into_iter()
            .map(|(h, _)| (h, WORDS));
        let blocks = std::mem::take(&mut p.blocks)
            .into_iter()
            .map(|(h, _, w)| (h, w));
        for (host, words) in pages.chain(blocks) {
            // SAFETY: a page or block of `alloc_host` of this size, freed
            // once (it left the list); every stream finished, so nothing
            // writes it.
            let _ = unsafe { driver.free_host(host as *mut u8, words * 4) };
        }
    }
}

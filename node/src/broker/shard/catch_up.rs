//! Pulls of log bytes released from memory, read without the page cache.
//!
//! Behind the kept window (`commitLogCacheKeepBytes`) the log's bytes were dropped from the
//! page cache. A consumer catching up through them used to read them back through it: a
//! helper thread read ahead into the cache (`posix_fadvise(WILLNEED)`), the pull spliced or
//! copied from there, another thread dropped them again behind the reader. Each 4 KiB cost a
//! page allocated, charged, put on the LRU and invalidated, about as much CPU as the rest of
//! the pull (docs/perf.md, "Catch-up from the disk").
//!
//! Here the shard reads such bytes itself in [`CHUNK_BYTES`] chunks with `O_DIRECT` on its
//! io_uring ([`NodeDisk::read_direct`]) into buffers it keeps ([`CHUNKS_MAX`] per shard,
//! least recently used dropped first, their memory used again), and a pull's records are
//! copied from the chunks into its response. After each pull the next [`AHEAD_CHUNKS`]
//! chunks past it are read in the background, so a reader going forward finds them read.
//!
//! What keeps a chunk true: only chunks wholly below the released line are read, and those
//! bytes are durable and never change, except when the log is cut back (recovery, a slave's
//! truncation to its master). Every chunk belongs to the store's truncation count it was
//! read under (`Store::log_truncations`): when the count moves, every chunk is dropped, and a
//! read that finishes after it moved is thrown away. A pull that cannot be served here (a
//! read failed, the log was cut meanwhile) is served the page-cache way, as before.
//!
//! Where `O_DIRECT` cannot open a segment (a file system without direct I/O), the path turns
//! itself off for the shard and pulls go the page-cache way.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use event_listener::Event;

use super::Shard;
use crate::io::direct::{AlignedBuf, DIRECT_ALIGN};
use crate::io::node_disk::DirectHandle;
use crate::io::rt;
use crate::store::Run;

/// Bytes of one direct read (the last chunk of a segment may be shorter), or the kept
/// window (`commitLogCacheKeepBytes`) in whole blocks when that is smaller: a node that
/// keeps little in memory reads little at a time.
pub const CHUNK_BYTES: u64 = 1 << 20;
/// Chunks a shard keeps.
pub const CHUNKS_MAX: usize = 32;
/// Chunks read ahead past each pull served here.
pub const AHEAD_CHUNKS: u64 = 4;
/// Chunk reads a shard has in flight at once, at most (reads a pull waits for are not
/// limited: only those ahead of it).
const AHEAD_READS_MAX: usize = 8;
/// Buffers of dropped chunks kept for the next reads.
const SPARE_BUFFERS_MAX: usize = 4;

/// A shard's chunks of released log bytes.
#[derive(Default)]
pub struct CatchUp {
    /// The path is on: the node asked for it and every segment opened with `O_DIRECT`.
    on: Cell<bool>,
    /// Chunks by the log offset of their first byte, least recently used first.
    chunks: RefCell<VecDeque<(u64, AlignedBuf)>>,
    /// Chunks being read, and what wakes the pulls waiting for each.
    reading: RefCell<HashMap<u64, Rc<Event>>>,
    /// Segments opened for direct reads, by segment start.
    files: RefCell<Vec<(u64, DirectHandle)>>,
    /// The store's truncation count the chunks were read under.
    truncations: Cell<u64>,
    /// Bytes of a chunk ([`CHUNK_BYTES`] or less).
    chunk_bytes: Cell<u64>,
    /// Chunks read so far.
    reads: Cell<u64>,
    spare: RefCell<Vec<AlignedBuf>>,
}

impl CatchUp {
    /// Off until [`Self::enable`].
    pub fn new() -> Self {
        let c = CatchUp::default();
        c.chunk_bytes.set(CHUNK_BYTES);
        c
    }

    pub fn is_on(&self) -> bool {
        self.on.get()
    }

    /// Chunks this shard has read with direct reads.
    pub fn chunks_read(&self) -> u64 {
        self.reads.get()
    }

    /// Turns the path on (or off) for a shard whose log has `segment_bytes` segments and
    /// keeps `keep_bytes` in memory (chunks no larger than that, in whole blocks): on
    /// only when segments are whole blocks (direct reads are block-aligned).
    pub fn enable(&self, on: bool, segment_bytes: u64, keep_bytes: u64) -> bool {
        let block = DIRECT_ALIGN as u64;
        let on = on && keep_bytes > 0 && segment_bytes % block == 0;
        self.chunk_bytes
            .set((keep_bytes / block * block).clamp(block, CHUNK_BYTES));
        self.on.set(on);
        on
    }

    /// Drops everything read under another truncation count than `truncations`.
    fn check(&self, truncations: u64) {
        if crate::planted::is(crate::planted::Bug::CatchUpKeepsCutChunks) {
            self.truncations.set(truncations);
            return;
        }
        if self.truncations.get() != truncations {
            self.truncations.set(truncations);
            self.chunks.borrow_mut().clear();
            self.files.borrow_mut().clear();
        }
    }

    fn has(&self, start: u64) -> bool {
        self.chunks.borrow().iter().any(|(s, _)| *s == start)
    }

    /// Keeps a chunk read under `truncations`, dropping the least recently used one past
    /// [`CHUNKS_MAX`]. A read under an older count is thrown away.
    fn insert(&self, start: u64, buf: AlignedBuf, truncations: u64) {
        let cut = self.truncations.get() != truncations
            && !crate::planted::is(crate::planted::Bug::CatchUpKeepsCutChunks);
        if cut || self.has(start) {
            self.recycle(buf);
            return;
        }
        let mut chunks = self.chunks.borrow_mut();
        chunks.push_back((start, buf));
        while chunks.len() > CHUNKS_MAX {
            if let Some((_, old)) = chunks.pop_front() {
                self.recycle(old);
            }
        }
    }

    fn recycle(&self, buf: AlignedBuf) {
        let mut spare = self.spare.borrow_mut();
        if spare.len() < SPARE_BUFFERS_MAX && buf.capacity() == self.chunk_bytes.get() as usize {
            spare.push(buf);
        }
    }

    fn buffer(&self) -> AlignedBuf {
        self.spare
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| AlignedBuf::new(self.chunk_bytes.get() as usize))
    }

    /// Copies `len` log bytes from `offset` out of the chunk starting at `start` (marking it
    /// used); `false` when that chunk is not here.
    fn copy_out(&self, start: u64, offset: u64, len: usize, out: &mut Vec<u8>) -> bool {
        let mut chunks = self.chunks.borrow_mut();
        let Some(i) = chunks.iter().position(|(s, _)| *s == start) else {
            return false;
        };
        let at = (offset - start) as usize;
        let Some(src) = chunks[i].1.get(at..at + len) else {
            return false;
        };
        out.extend_from_slice(src);
        if i + 1 != chunks.len() {
            if let Some(c) = chunks.remove(i) {
                chunks.push_back(c);
            }
        }
        true
    }
}

/// A piece of a pull's records: `len` bytes at log offset `offset`, from the chunk starting
/// at `chunk` (`None`: above the released line, read from the log as usual).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    offset: u64,
    len: usize,
    chunk: Option<u64>,
}

/// Where a run's bytes come from: cut at chunk boundaries (chunks start at whole multiples
/// of the chunk size inside a segment starting at `segment_start`), from chunks while a
/// chunk ends at or below `released`.
fn pieces(run: Run, segment_start: u64, sizes: Sizes, released: u64, out: &mut Vec<Piece>) {
    let end = run.physical_offset + u64::from(run.len);
    let mut at = run.physical_offset;
    while at < end {
        let (chunk, chunk_end) = chunk_of(at, segment_start, sizes);
        let to = end.min(chunk_end);
        out.push(Piece {
            offset: at,
            len: (to - at) as usize,
            chunk: (chunk_end <= released).then_some(chunk),
        });
        at = to;
    }
}

/// The chunk holding log offset `at` of the segment starting at `segment_start`: its first
/// offset and its end.
fn chunk_of(at: u64, segment_start: u64, sizes: Sizes) -> (u64, u64) {
    let chunk = segment_start + (at - segment_start) / sizes.chunk * sizes.chunk;
    (
        chunk,
        (chunk + sizes.chunk).min(segment_start + sizes.segment),
    )
}

/// Chunks of `chunk` bytes in segments of `segment` bytes.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    chunk: u64,
    segment: u64,
}

impl Shard {
    /// Whether a pull of `runs` starts in released bytes, where [`Self::read_released`]
    /// serves it.
    pub fn catch_up_serves(&self, runs: &[Run]) -> bool {
        self.catch_up.is_on()
            && runs
                .first()
                .is_some_and(|r| r.physical_offset < self.store.borrow().cache_released())
    }

    /// The bytes of `runs`, those below the released line from direct-read chunks (read now
    /// where they are not here yet), the rest from the log; then the chunks after them are
    /// read ahead. `None` when they cannot be served this way (a read failed, or the log was
    /// cut back meanwhile): the caller serves the pull from the log.
    pub async fn read_released(self: &Rc<Self>, runs: &[Run], total: usize) -> Option<Vec<u8>> {
        for _ in 0..3 {
            let (plan, truncations) = self.plan(runs)?;
            let missing: Vec<u64> = {
                let mut m: Vec<u64> = plan
                    .iter()
                    .filter_map(|p| p.chunk)
                    .filter(|c| !self.catch_up.has(*c))
                    .collect();
                m.dedup();
                m
            };
            if missing.len() > CHUNKS_MAX / 2 {
                // More than the shard keeps at once beside the other readers' (a pull of
                // many MiB, or chunks made small by a small kept window).
                return None;
            }
            if missing.is_empty() {
                let bytes = self.assemble(&plan, total)?;
                if let Some(last) = plan.last() {
                    self.read_ahead_from(last.offset + last.len as u64);
                }
                return Some(bytes);
            }
            for chunk in missing {
                if !self.chunk_read(chunk, truncations).await {
                    return None;
                }
            }
            if self.store.borrow().log_truncations() != truncations {
                return None;
            }
        }
        None
    }

    fn chunk_sizes(&self, store: &crate::store::Store<crate::io::node_disk::NodeDisk>) -> Sizes {
        Sizes {
            chunk: self.catch_up.chunk_bytes.get(),
            segment: store.segment_bytes(),
        }
    }

    /// The pieces of `runs` and the truncation count they were planned under.
    fn plan(&self, runs: &[Run]) -> Option<(Vec<Piece>, u64)> {
        let store = self.store.borrow();
        let truncations = store.log_truncations();
        self.catch_up.check(truncations);
        let released = store.cache_released();
        let sizes = self.chunk_sizes(&store);
        let mut plan = Vec::with_capacity(runs.len() + 1);
        for run in runs {
            let (_, in_segment) = store.locate(run.physical_offset).ok()?;
            pieces(
                *run,
                run.physical_offset - in_segment,
                sizes,
                released,
                &mut plan,
            );
        }
        Some((plan, truncations))
    }

    /// Copies the pieces out; `None` when a chunk went missing (dropped for a newer one, or
    /// by a truncation) or the log could not be read.
    fn assemble(&self, plan: &[Piece], total: usize) -> Option<Vec<u8>> {
        let mut bytes = Vec::with_capacity(total);
        let store = self.store.borrow();
        for p in plan {
            match p.chunk {
                Some(chunk) => {
                    if !self.catch_up.copy_out(chunk, p.offset, p.len, &mut bytes) {
                        return None;
                    }
                }
                None => store.read_append(p.offset, p.len, &mut bytes).ok()?,
            }
        }
        Some(bytes)
    }

    /// Waits until the chunk starting at `chunk` has been read (reading it unless a read of
    /// it is under way); `false` when it could not be.
    async fn chunk_read(self: &Rc<Self>, chunk: u64, truncations: u64) -> bool {
        let waiting = self.catch_up.reading.borrow().get(&chunk).cloned();
        if let Some(done) = waiting {
            let listener = done.listen();
            if self.catch_up.reading.borrow().contains_key(&chunk) {
                listener.await;
            }
            return true;
        }
        self.read_chunk(chunk, truncations).await
    }

    /// Reads the chunk starting at `chunk` with `O_DIRECT` and keeps it.
    async fn read_chunk(self: &Rc<Self>, chunk: u64, truncations: u64) -> bool {
        let done = Rc::new(Event::new());
        self.catch_up
            .reading
            .borrow_mut()
            .insert(chunk, Rc::clone(&done));
        let ok = self.read_chunk_now(chunk, truncations).await;
        self.catch_up.reading.borrow_mut().remove(&chunk);
        done.notify(usize::MAX);
        ok
    }

    async fn read_chunk_now(self: &Rc<Self>, chunk: u64, truncations: u64) -> bool {
        let Some((file, in_segment, len)) = self.direct_file(chunk) else {
            return false;
        };
        let buf = self.catch_up.buffer();
        let (res, mut buf) = self.disk().read_direct(&file, in_segment, buf).await;
        if let Err(e) = res {
            log::warn!(
                "shard {}: a direct read of released log bytes at {chunk} failed ({e}); the pull reads them through the page cache",
                self.id
            );
            self.catch_up.recycle(buf);
            return false;
        }
        if buf.len() < len {
            self.catch_up.recycle(buf);
            return false;
        }
        buf.set_filled(len);
        self.catch_up.reads.set(self.catch_up.reads.get() + 1);
        // Thrown away when the log was cut back while it was read.
        let now = self.store.borrow().log_truncations();
        self.catch_up.check(now);
        self.catch_up.insert(chunk, buf, truncations);
        now == truncations
    }

    /// The segment of `chunk` opened for direct reads, the chunk's offset in it and its
    /// length. Turns the path off when the segment cannot be opened so.
    fn direct_file(&self, chunk: u64) -> Option<(DirectHandle, u64, usize)> {
        let store = self.store.borrow();
        let (file, in_segment) = store.locate(chunk).ok()?;
        let segment_start = chunk - in_segment;
        let (_, end) = chunk_of(chunk, segment_start, self.chunk_sizes(&store));
        let len = (end - chunk) as usize;
        let mut files = self.catch_up.files.borrow_mut();
        if let Some((_, f)) = files.iter().find(|(s, _)| *s == segment_start) {
            return Some((f.clone(), in_segment, len));
        }
        match store.disk().open_direct(file) {
            Ok(f) => {
                files.retain(|(s, _)| *s >= store.min_offset());
                files.push((segment_start, f.clone()));
                Some((f, in_segment, len))
            }
            Err(e) => {
                log::warn!(
                    "shard {}: log segments cannot be opened with O_DIRECT here ({e}); pulls of released bytes read them through the page cache",
                    self.id
                );
                self.catch_up.on.set(false);
                drop(files);
                drop(store);
                self.store.borrow_mut().set_direct_catch_up(false);
                None
            }
        }
    }

    /// Starts reading the [`AHEAD_CHUNKS`] chunks after log offset `from` that are released,
    /// not here and not being read, in the background.
    fn read_ahead_from(self: &Rc<Self>, from: u64) {
        let store = self.store.borrow();
        let truncations = store.log_truncations();
        let released = store.cache_released();
        let sizes = self.chunk_sizes(&store);
        let mut at = from;
        let mut wanted = Vec::new();
        for _ in 0..AHEAD_CHUNKS {
            let Ok((_, in_segment)) = store.locate(at) else {
                break;
            };
            let (chunk, end) = chunk_of(at, at - in_segment, sizes);
            if end > released {
                break;
            }
            wanted.push(chunk);
            at = end;
        }
        drop(store);
        for chunk in wanted {
            if self.catch_up.has(chunk) || self.catch_up.reading.borrow().contains_key(&chunk) {
                continue;
            }
            if self.catch_up.reading.borrow().len() >= AHEAD_READS_MAX {
                break;
            }
            let shard = Rc::clone(self);
            // Marked as being read before the task runs, so the next pull waits for it.
            let done = Rc::new(Event::new());
            self.catch_up
                .reading
                .borrow_mut()
                .insert(chunk, Rc::clone(&done));
            rt::spawn(async move {
                shard.read_chunk_now(chunk, truncations).await;
                shard.catch_up.reading.borrow_mut().remove(&chunk);
                done.notify(usize::MAX);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn run(at: u64, len: u32) -> Run {
        Run {
            physical_offset: at,
            len,
        }
    }

    #[test]
    fn a_run_is_cut_at_chunk_ends_and_read_from_chunks_only_below_the_released_line() {
        let mut out = Vec::new();
        // Segment of 3.5 MiB at 7 MiB; a run from 7.5 MiB to 10 MiB; released up to 9 MiB.
        let seg = 7 * MIB;
        let sizes = Sizes {
            chunk: MIB,
            segment: 7 * MIB / 2,
        };
        pieces(
            run(seg + MIB / 2, (5 * MIB / 2) as u32),
            seg,
            sizes,
            9 * MIB,
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                Piece {
                    offset: seg + MIB / 2,
                    len: (MIB / 2) as usize,
                    chunk: Some(seg)
                },
                Piece {
                    offset: seg + MIB,
                    len: MIB as usize,
                    chunk: Some(seg + MIB)
                },
                Piece {
                    offset: seg + 2 * MIB,
                    len: MIB as usize,
                    chunk: None
                },
            ]
        );
        // The last chunk of the segment is its rest: half a MiB.
        assert_eq!(
            chunk_of(seg + 3 * MIB + 5, seg, sizes),
            (seg + 3 * MIB, seg + 7 * MIB / 2)
        );
    }

    #[test]
    fn chunks_are_dropped_least_recently_used_first_and_all_when_the_log_is_cut() {
        let c = CatchUp::new();
        c.check(0);
        let filled = |b: u8| {
            let mut buf = AlignedBuf::new(CHUNK_BYTES as usize);
            buf.spare().fill(b);
            buf.set_filled(CHUNK_BYTES as usize);
            buf
        };
        for i in 0..CHUNKS_MAX as u64 {
            c.insert(i * CHUNK_BYTES, filled(i as u8), 0);
        }
        let mut out = Vec::new();
        assert!(c.copy_out(0, 10, 3, &mut out), "chunk 0 is here");
        assert_eq!(out, vec![0, 0, 0]);
        c.insert(CHUNKS_MAX as u64 * CHUNK_BYTES, filled(99), 0);
        assert!(c.has(0), "chunk 0 was used last: kept");
        assert!(
            !c.has(CHUNK_BYTES),
            "chunk 1 was the least recently used: dropped"
        );
        // A read that finished under an older truncation count is not kept.
        c.check(1);
        assert!(!c.has(0), "a cut of the log drops every chunk");
        c.insert(5 * CHUNK_BYTES, filled(5), 0);
        assert!(
            !c.has(5 * CHUNK_BYTES),
            "a chunk read before the cut is thrown away"
        );
        c.insert(5 * CHUNK_BYTES, filled(5), 1);
        assert!(c.has(5 * CHUNK_BYTES));
    }
}

//! The memory cap lives in the allocator rather than in QuickJS, so a refused
//! allocation is always known to be an out-of-memory condition, even when
//! QuickJS then fails to allocate the error object and throws `null`.

use std::alloc::{self, Layout};
use std::cell::Cell;
use std::rc::Rc;

use rquickjs::allocator::Allocator;

/// Covers every type QuickJS stores (doubles, 64-bit ints, pointers).
const ALIGN: usize = 16;
/// Each block starts with its usable size, padded to keep the payload aligned.
const HEADER: usize = ALIGN;

/// A runtime's memory: what it holds now, and the current run's cap, peak and refusals.
#[derive(Debug, Default)]
pub(super) struct MemoryStats {
    limit: Cell<usize>,
    used: Cell<usize>,
    peak: Cell<usize>,
    refused: Cell<bool>,
}

impl MemoryStats {
    /// Starts a run that may hold `limit` bytes in all (the runtime's own included).
    pub(super) fn begin(&self, limit: usize) {
        self.limit.set(limit);
        self.peak.set(self.used.get());
        self.refused.set(false);
    }

    pub(super) fn used(&self) -> usize {
        self.used.get()
    }

    pub(super) fn peak(&self) -> usize {
        self.peak.get()
    }

    /// True once any allocation was refused for exceeding the cap.
    pub(super) fn exhausted(&self) -> bool {
        self.refused.get()
    }
}

pub(super) struct CappedAllocator {
    stats: Rc<MemoryStats>,
}

impl CappedAllocator {
    pub(super) fn new(stats: Rc<MemoryStats>) -> Self {
        Self { stats }
    }

    fn reserve(&self, bytes: usize) -> bool {
        match self.stats.used.get().checked_add(bytes) {
            Some(used) if used <= self.stats.limit.get() => {
                self.stats.used.set(used);
                if used > self.stats.peak.get() {
                    self.stats.peak.set(used);
                }
                true
            }
            _ => {
                self.stats.refused.set(true);
                false
            }
        }
    }

    fn release(&self, bytes: usize) {
        self.stats.used.set(self.stats.used.get() - bytes);
    }

    fn allocate(&mut self, size: usize, zeroed: bool) -> *mut u8 {
        let Some((usable, layout)) = block_layout(size) else {
            self.stats.refused.set(true);
            return std::ptr::null_mut();
        };
        if !self.reserve(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: layout has a non-zero size (it includes the header).
        let base = unsafe {
            if zeroed {
                alloc::alloc_zeroed(layout)
            } else {
                alloc::alloc(layout)
            }
        };
        if base.is_null() {
            self.release(layout.size());
            return base;
        }
        // SAFETY: the block is at least HEADER bytes and ALIGN-aligned.
        unsafe {
            base.cast::<usize>().write(usable);
            base.add(HEADER)
        }
    }
}

fn block_layout(size: usize) -> Option<(usize, Layout)> {
    let usable = size.checked_add(ALIGN - 1)? & !(ALIGN - 1);
    let layout = Layout::from_size_align(usable.checked_add(HEADER)?, ALIGN).ok()?;
    Some((usable, layout))
}

/// # Safety
/// `ptr` must come from `CappedAllocator::allocate`.
unsafe fn header(ptr: *mut u8) -> (*mut u8, usize) {
    let base = ptr.sub(HEADER);
    (base, base.cast::<usize>().read())
}

// SAFETY: every block is ALIGN-aligned, at least the requested size, and its
// usable size is recorded in the header that `usable_size` reads.
unsafe impl Allocator for CappedAllocator {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        self.allocate(size, false)
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        match count.checked_mul(size) {
            Some(total) => self.allocate(total, true),
            None => {
                self.stats.refused.set(true);
                std::ptr::null_mut()
            }
        }
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        let (base, usable) = header(ptr);
        let layout = Layout::from_size_align_unchecked(usable + HEADER, ALIGN);
        self.release(layout.size());
        alloc::dealloc(base, layout);
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        if ptr.is_null() {
            return self.allocate(new_size, false);
        }
        let Some((new_usable, new_layout)) = block_layout(new_size) else {
            self.stats.refused.set(true);
            return std::ptr::null_mut();
        };
        let (base, old_usable) = header(ptr);
        let old_layout = Layout::from_size_align_unchecked(old_usable + HEADER, ALIGN);
        let growth = new_layout.size().saturating_sub(old_layout.size());
        if growth > 0 && !self.reserve(growth) {
            return std::ptr::null_mut();
        }
        let new_base = alloc::realloc(base, old_layout, new_layout.size());
        if new_base.is_null() {
            self.release(growth);
            return new_base;
        }
        self.release(old_layout.size().saturating_sub(new_layout.size()));
        new_base.cast::<usize>().write(new_usable);
        new_base.add(HEADER)
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        header(ptr).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allocator_refuses_past_its_cap_and_remembers_the_peak() {
        let stats = Rc::new(MemoryStats::default());
        stats.begin(1024);
        let mut a = CappedAllocator::new(stats.clone());
        let p = a.alloc(600);
        assert!(!p.is_null());
        assert!(a.alloc(600).is_null());
        assert!(stats.exhausted());
        let p = unsafe { a.realloc(p, 100) };
        assert!(!p.is_null());
        assert_eq!(unsafe { CappedAllocator::usable_size(p) }, 112);
        unsafe { a.dealloc(p) };
        assert_eq!(stats.used.get(), 0);
        assert_eq!(stats.peak(), 600 + 8 + HEADER);
    }
}

import CMalloc

/// The process's allocator (glibc's malloc), set up so that memory a large input took goes back
/// to the system once it is freed, which glibc's defaults do not do:
///
/// - glibc serves a block of 128 KiB or more with its own `mmap`, unmapped when freed, but each
///   such block freed raises that threshold to its size (up to 32 MiB), so that the next ones
///   come from the heap and stay in the process when freed. A 30 MiB D-Bus message then keeps
///   30 MiB of RSS. ``configure()`` fixes the threshold (`mallopt(M_MMAP_THRESHOLD, …)`), which
///   turns the raising off.
/// - Small blocks freed (a refused config file's YAML tree, thousands of them) stay in the heap's
///   free lists; ``returnFreeMemory()`` (`malloc_trim(0)`) gives their pages back. The daemon
///   calls it after each reload of the configuration, applied or refused.
///
/// Measured: `benchmarks/memory_bench.py` (docs/reliability.md, "Bounded memory").
public enum SystemAllocator {
    /// Blocks of at least this many bytes are mapped on their own and unmapped when freed.
    public static let mmapThreshold: Int32 = 128 * 1024

    /// `mallopt(M_MMAP_THRESHOLD, mmapThreshold)`; false if glibc refused it. Call once, early.
    @discardableResult
    public static func configure() -> Bool {
        mallopt(M_MMAP_THRESHOLD, mmapThreshold) == 1
    }

    /// `malloc_trim(0)`: returns the free pages of every arena to the system; true if some were.
    @discardableResult
    public static func returnFreeMemory() -> Bool {
        malloc_trim(0) == 1
    }
}

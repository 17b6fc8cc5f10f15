import Foundation
import ProximityTrust
import ProximityNode
import Testing

/// A secret's file (``SecretFile``): what a fleet key file, an IRK file and a password file are
/// read with.
@Suite struct SecretFileTests {
    @Test("a FIFO named as a secret's file is refused at once (not waited on for a writer), as a symbolic link and a file others can read are")
    func notARegularFile() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let fifo = dir.appendingPathComponent("key").path
        #expect(mkfifo(fifo, 0o600) == 0)
        // On a thread of its own: a read that blocked would hang it, not the test.
        let answer: String? = await withCheckedContinuation { continuation in
            let done = DispatchSemaphore(value: 0)
            let result = LockedBox<String?>(nil)
            Thread {
                do { _ = try SecretFile.read(path: fifo, maxSize: 4096, what: "a fleet key") } catch { result.set("\(error)") }
                done.signal()
            }.start()
            Thread {
                continuation.resume(returning: done.wait(timeout: .now() + 5) == .success ? result.get() : "still waiting after 5 s")
            }.start()
        }
        #expect(answer == "\(fifo) is not a regular file")

        let key = dir.appendingPathComponent("real").path
        #expect(FileManager.default.createFile(atPath: key, contents: Data("secret\n".utf8), attributes: [.posixPermissions: 0o600]))
        #expect(try SecretFile.read(path: key, maxSize: 4096, what: "a fleet key") == "secret\n")
        let link = dir.appendingPathComponent("link").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: key)
        #expect(throws: SecretFileError.self) { try SecretFile.read(path: link, maxSize: 4096, what: "a fleet key") }
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: key)
        #expect(throws: SecretFileError.self) { try SecretFile.read(path: key, maxSize: 4096, what: "a fleet key") }
    }
}

/// A value shared between threads.
final class LockedBox<T>: @unchecked Sendable {
    private var value: T
    private let lock = NSLock()
    init(_ value: T) { self.value = value }
    func set(_ new: T) { lock.lock(); value = new; lock.unlock() }
    func get() -> T { lock.lock(); defer { lock.unlock() }; return value }
}

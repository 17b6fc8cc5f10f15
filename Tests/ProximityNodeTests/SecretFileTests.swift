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

/// The state directory's files as the node reads and writes them (issue 32, item 6).
@Suite struct StateFileSafetyTests {
    @Test("settings.json (it holds IRKs) readable by others is refused with the chmod; a symbolic link or a FIFO in place of a state file is refused, never followed or waited on; a temporary left at the write's name is replaced, a link there not followed")
    func stateFiles() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("state-safety-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = try StateDirectory(directory)
        try NodeSettings().save(to: state)
        let settings = directory.appendingPathComponent(NodeSettings.fileName).path
        var info = stat()
        #expect(stat(settings, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(try state.read(NodeSettings.fileName, secret: true) != nil)
        chmod(settings, 0o644)
        do {
            _ = try state.read(NodeSettings.fileName, secret: true)
            Issue.record("a settings.json of mode 644 was read")
        } catch {
            #expect("\(error)".contains("chmod 600 \(settings)"), "\(error)")
        }
        // A link in place of peers.json, to a file elsewhere: refused.
        let elsewhere = directory.appendingPathComponent("elsewhere.json").path
        try "{}".write(toFile: elsewhere, atomically: false, encoding: .utf8)
        symlink(elsewhere, directory.appendingPathComponent("peers.json").path)
        #expect(throws: StateError.self) { _ = try state.read("peers.json") }
        // A FIFO: refused at once.
        mkfifo(directory.appendingPathComponent("regions.json").path, 0o600)
        #expect(throws: StateError.self) { _ = try state.read("regions.json") }
        // A link planted at the write's temporary name: not followed; the write makes its own file.
        let victim = directory.appendingPathComponent("victim").path
        try "untouched".write(toFile: victim, atomically: false, encoding: .utf8)
        symlink(victim, directory.appendingPathComponent(".alerts.json.tmp-\(getpid())").path)
        try state.write("alerts.json", Data("{}\n".utf8))
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "untouched")
        #expect(try state.read("alerts.json") == Data("{}\n".utf8))
    }
}

import Foundation
import ProximityTesting

/// The shell sessions of the documentation, run as printed (issue 23, item 8). The conventions
/// are stated for readers in docs/README.md ("Sessions that run"); in short:
///
/// - A session is a fenced block whose info string is exactly `console`. Blocks marked `sh` (or
///   anything else) are never run.
/// - A line starting with `$ ` is a command (a line ending in `\` goes on on the next one); the
///   lines after it, up to the next command or the end of the block, are its expected output
///   (standard output and standard error together).
/// - A command whose last character is `&` (not `&&`) runs in the background: its output goes to
///   a log (shown when the session fails), and it claims none.
/// - `$ cat FILE`, when FILE does not exist yet, is how a document shows a file: the runner first
///   writes the block's lines under it to FILE.
/// - A command that claims no output must also exit 0.
///
/// A document's sessions run in order in one `bash`, in a fresh directory, with the freshly built
/// products first on `PATH`: variables and background jobs carry over from block to block.
enum DocSession {
    /// The info string that marks a block as a session.
    static let marker = "console"

    /// One `$ ` command of a session, with the output the document claims for it.
    struct Command: Equatable, Sendable {
        /// The 1-based line of the `$ ` in the document.
        var line: Int
        /// The command as bash gets it (continued lines joined by newlines, the `\` kept).
        var text: String
        var expected: [String]

        var isBackground: Bool {
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            return trimmed.hasSuffix("&") && !trimmed.hasSuffix("&&")
        }

        /// FILE, if the command is exactly `cat FILE`.
        var shownFile: String? {
            let words = text.split(separator: " ", omittingEmptySubsequences: true)
            guard words.count == 2, words[0] == "cat",
                  !words[1].contains(where: { ";|&<>$`'\"\\*?".contains($0) }) else { return nil }
            return String(words[1])
        }
    }

    /// The commands of every session in `markdown`, in order. Throws for a session that does not
    /// start with a command, or a fence left open.
    static func commands(in markdown: String) throws -> [Command] {
        var commands: [Command] = []
        var fence: String?          // the open fence ("```"), if inside a block
        var isSession = false
        var continuing = false      // the last command line ended in `\`
        var blockHasCommand = false
        for (index, raw) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw)
            let number = index + 1
            if let open = fence {
                if line.trimmingCharacters(in: .whitespaces) == open {
                    fence = nil
                    if continuing { throw TestKitError("line \(number): the block ends inside a continued command") }
                    continue
                }
                guard isSession else { continue }
                if continuing {
                    commands[commands.count - 1].text += "\n" + line
                    continuing = line.hasSuffix("\\")
                } else if line.hasPrefix("$ ") {
                    commands.append(Command(line: number, text: String(line.dropFirst(2)), expected: []))
                    continuing = line.hasSuffix("\\")
                    blockHasCommand = true
                } else if !blockHasCommand {
                    throw TestKitError("line \(number): a session's first line must be a command (`$ `), not \(line.debugDescription)")
                } else {
                    commands[commands.count - 1].expected.append(line)
                }
            } else {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                guard trimmed.hasPrefix("```") else { continue }
                let ticks = String(trimmed.prefix { $0 == "`" })
                fence = ticks
                blockHasCommand = false
                isSession = trimmed.dropFirst(ticks.count).trimmingCharacters(in: .whitespaces) == marker
            }
        }
        if fence != nil { throw TestKitError("a fenced block is never closed") }
        // Trailing empty lines of an output are not part of it.
        for i in commands.indices {
            while commands[i].expected.last?.trimmingCharacters(in: .whitespaces).isEmpty == true {
                commands[i].expected.removeLast()
            }
        }
        return commands
    }
}

/// Compares a command's actual output with the output a document claims, with a tolerance for
/// what changes from run to run. Lines are compared whole, trailing blanks ignored, and:
///
/// - a line that is only `...` or `…` (indentation allowed) stands for any number of lines, none
///   included;
/// - `…` inside a line stands for any text on that line;
/// - a token of one of these kinds stands for any token of the same kind: a UUID, a UUID escaped
///   as an object path element (`f713b801_2df018_…`), a Bluetooth address, a D-Bus unique name
///   (`:1.23`), a bus address (`unix:path=…`), a date or time (`2026-11-23T15:00:00.123Z`,
///   `Mon 2026-11-23 17:35:21.484997 UTC`, `17:35:21`), and a number with a fractional part
///   (`1.52`, `-0.5`, `1.79546e+09`: distances, RSSI averages, times in seconds).
///
/// Everything else is literal: words, quotes, integers (counts, exit statuses, signatures' sizes)
/// and the order of lines.
enum DocOutput {
    private static let kinds: [String] = [
        // Bluetooth addresses
        #"\b[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}\b"#,
        // dates and times
        #"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) )?\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2}| UTC)?"#,
        #"\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b"#,
        // UUIDs, and as an object path element (a leading digit escaped as _3N)
        #"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"#,
        #"(?:[a-f]|_3[0-9])[0-9a-f]{7}_2d[0-9a-f]{4}_2d[0-9a-f]{4}_2d[0-9a-f]{4}_2d[0-9a-f]{12}"#,
        // bus addresses
        #"unix:[^\s"',;]+(?:,[a-z]+=[^\s"',;]+)*"#,
        // D-Bus unique names
        #":\d+\.\d+\b"#,
        // numbers with a fractional part
        #"-?\b\d+\.\d+(?:[eE][+-]?\d+)?\b"#,
    ]
    private static let tokenPattern = try! NSRegularExpression(pattern: kinds.map { "(\($0))" }.joined(separator: "|"))

    /// The regular expression a line of expected output stands for.
    static func pattern(_ expected: String) -> String {
        let line = trimmed(expected)
        let ns = line as NSString
        var pattern = "^"
        var position = 0
        func literal(_ text: String) -> String {
            text.components(separatedBy: "…").map { NSRegularExpression.escapedPattern(for: $0) }.joined(separator: ".*")
        }
        for match in tokenPattern.matches(in: line, range: NSRange(location: 0, length: ns.length)) {
            pattern += literal(ns.substring(with: NSRange(location: position, length: match.range.location - position)))
            let kind = (1...kinds.count).first { match.range(at: $0).location != NSNotFound }!
            pattern += "(?:\(kinds[kind - 1]))"
            position = match.range.location + match.range.length
        }
        pattern += literal(ns.substring(from: position)) + "$"
        return pattern
    }

    static func lineMatches(expected: String, actual: String) -> Bool {
        guard let regex = try? NSRegularExpression(pattern: pattern(expected)) else { return false }
        let line = trimmed(actual)
        return regex.firstMatch(in: line, range: NSRange(location: 0, length: (line as NSString).length)) != nil
    }

    static func isEllipsis(_ line: String) -> Bool {
        let t = line.trimmingCharacters(in: .whitespaces)
        return t == "..." || t == "…"
    }

    /// Whether `actual` (a command's output) matches the lines a document claims.
    static func matches(expected: [String], actual: String) -> Bool {
        matches(expected: expected[...], actual: lines(actual)[...])
    }

    private static func matches(expected: ArraySlice<String>, actual: ArraySlice<String>) -> Bool {
        guard let first = expected.first else { return actual.isEmpty }
        if isEllipsis(first) {
            let rest = expected.dropFirst()
            return actual.indices.map { actual[$0...] }.contains { matches(expected: rest, actual: $0) }
                || matches(expected: rest, actual: actual[actual.endIndex...])
        }
        guard let line = actual.first, lineMatches(expected: first, actual: line) else { return false }
        return matches(expected: expected.dropFirst(), actual: actual.dropFirst())
    }

    /// Output as lines: without the last newline and trailing empty lines.
    static func lines(_ text: String) -> [String] {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        while lines.last.map({ trimmed($0).isEmpty }) == true { lines.removeLast() }
        return lines
    }

    private static func trimmed(_ line: String) -> String {
        var line = line
        while line.last == " " || line.last == "\t" || line.last == "\r" { line.removeLast() }
        return line
    }
}

/// Runs one document's sessions in one bash, in a fresh directory, and kills everything it started.
struct DocSessionRunner {
    var document: URL
    /// How the document is named in failures (`docs/regions.md`).
    var name: String
    var commandTimeout: Duration = .seconds(20)

    private static let mark = "\u{1E}DOCSESSION"

    /// The first failure, or nil if every command printed what the document claims.
    func run() async throws -> String? {
        let commands = try DocSession.commands(in: String(contentsOf: document, encoding: .utf8))
        guard !commands.isEmpty else { return nil }
        let root = FileManager.default.temporaryDirectory
            .appendingPathComponent("doc-session-\(document.deletingPathExtension().lastPathComponent)-\(UUID().uuidString.prefix(8))")
        let work = root.appendingPathComponent("work")
        let logs = root.appendingPathComponent("logs")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }

        let script = root.appendingPathComponent("session.sh")
        try Self.script(commands, work: work.path, logs: logs.path).write(to: script, atomically: true, encoding: .utf8)
        let path = BuiltProducts.directory.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        // setsid: bash leads a session of its own, so everything it starts can be found and ended.
        let shell = try ManagedProcess("/usr/bin/setsid", ["/bin/bash", "--noprofile", "--norc", script.path],
                                       environment: ["PATH": path, "LC_ALL": "C.UTF-8", "SYSTEMD_COLORS": "0", "SYSTEMD_PAGER": "cat"])
        // If this test process dies, the watchdog ends the session's process group.
        let watchdog = try ManagedProcess("/bin/sh", ["-c", "while read -r _; do :; done; kill -9 -\(shell.pid) 2>/dev/null"],
                                          keepStdinOpen: true)
        var failure: String?
        for (i, command) in commands.enumerated() {
            let mark = "\(Self.mark) \(i) "
            let printed = await shell.waitForOutput(timeout: commandTimeout) { $0.contains(mark) }
            let output = Self.output(shell.stdout, of: i)
            let where_ = "\(name):\(command.line): $ \(command.text)"
            guard printed, let (text, status) = output else {
                failure = "\(where_)\ndid not finish within \(commandTimeout)\(shell.isRunning ? "" : " (the shell exited)"); its output so far:\n"
                    + Self.indent(Self.output(shell.stdout, after: i))
                break
            }
            if !DocOutput.matches(expected: command.expected, actual: text) {
                failure = "\(where_)\nexpected:\n\(Self.indent(command.expected.joined(separator: "\n")))\nactual (exit \(status)):\n\(Self.indent(text))"
                break
            }
            if command.expected.isEmpty && status != 0 {
                failure = "\(where_)\nexited \(status); a command that shows no output must succeed"
                break
            }
        }
        let leftovers = await Self.endSession(shell.pid)
        watchdog.signal(SIGKILL)
        if var failure {
            for log in (try? FileManager.default.contentsOfDirectory(atPath: logs.path).sorted()) ?? [] {
                let text = (try? String(contentsOfFile: logs.appendingPathComponent(log).path, encoding: .utf8)) ?? ""
                let tail = text.split(separator: "\n").suffix(15).joined(separator: "\n")
                failure += "\n--- background job \(log) (last lines):\n\(Self.indent(tail))"
            }
            return failure
        }
        if !leftovers.isEmpty { return "\(name): processes left after SIGKILL: \(leftovers)" }
        return nil
    }

    /// The script bash runs: each command, then a mark with its index and exit status.
    static func script(_ commands: [DocSession.Command], work: String, logs: String) -> String {
        var script = """
            exec 2>&1 </dev/null
            unset PROXIMITYD_BUS DBUS_SYSTEM_BUS_ADDRESS DBUS_SESSION_BUS_ADDRESS
            cd \(quote(work)) || exit 1

            """
        for (i, command) in commands.enumerated() {
            script += "# \(command.line)\n"
            if let file = command.shownFile {
                let lines = command.expected.map(quote).joined(separator: " ")
                script += "[ -e \(quote(file)) ] || printf '%s\\n' \(lines) > \(quote(file))\n"
            }
            if command.isBackground {
                // In a group of this shell (its jobs stay this shell's jobs), with its output in a log.
                script += "{ \(command.text)\n} >>\(quote("\(logs)/line-\(command.line).log")) 2>&1\n"
                script += "printf '\(mark) \(i) 0\\n'\n"
            } else if command.text.hasPrefix("until ") {
                // A wait: its attempts may fail while it waits (an object not there yet, a file not
                // written yet); what counts is that it ends, and what it prints on standard output.
                script += "{ \(command.text)\n} 2>/dev/null\n"
                script += "printf '\(mark) \(i) %d\\n' $?\n"
            } else {
                script += "\(command.text)\n"
                script += "printf '\(mark) \(i) %d\\n' $?\n"
            }
        }
        return script
    }

    /// Command `i`'s output and exit status, once its mark is printed.
    static func output(_ stdout: String, of i: Int) -> (String, Int32)? {
        let start = i == 0 ? stdout.startIndex : stdout.range(of: "\(mark) \(i - 1) ").flatMap { r in
            stdout[r.upperBound...].firstIndex(of: "\n").map { stdout.index(after: $0) }
        }
        guard let start, let end = stdout.range(of: "\(mark) \(i) ", range: start..<stdout.endIndex) else { return nil }
        let statusText = stdout[end.upperBound...].prefix { $0 != "\n" }
        return (String(stdout[start..<end.lowerBound]), Int32(statusText) ?? -1)
    }

    /// Everything printed after command `i - 1`'s mark.
    static func output(_ stdout: String, after i: Int) -> String {
        guard i > 0, let r = stdout.range(of: "\(mark) \(i - 1) ") else { return stdout }
        return String(stdout[r.upperBound...].drop { $0 != "\n" }.dropFirst())
    }

    static func quote(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    static func indent(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { "    " + $0 }.joined(separator: "\n")
    }

    /// The processes of session `sid` that have not exited (zombies left out).
    static func members(_ sid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            // After "(comm)": state, ppid, pgrp, session, …
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 3, fields[0] != "Z", Int32(fields[3]) == sid else { return nil }
            return pid
        }
    }

    /// Ends every process of the session (SIGTERM, then SIGKILL after 5 s); returns those left.
    static func endSession(_ sid: Int32) async -> [Int32] {
        for pid in members(sid) { kill(pid, SIGTERM) }
        // Processes outside this one's children have no exit event to wait on: /proc is looked at
        // until they are gone.
        let clock = ContinuousClock()
        var deadline = clock.now + .seconds(5)
        while !members(sid).isEmpty && clock.now < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        for pid in members(sid) { kill(pid, SIGKILL) }
        deadline = clock.now + .seconds(3)
        while !members(sid).isEmpty && clock.now < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        return members(sid)
    }
}

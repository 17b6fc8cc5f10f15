import Foundation

/// One line of the doctor's report: what was checked, what was found, and for a problem its fix.
public struct DoctorCheck: Sendable, Hashable {
    public enum Status: String, Sendable { case ok, warn, fail, skipped }
    public let name: String
    public let status: Status
    public let detail: String
    public let fix: String?

    public init(name: String, status: Status, detail: String, fix: String? = nil) {
        self.name = name
        self.status = status
        self.detail = detail
        self.fix = fix
    }

    /// `ok      kernel: …`, with `        fix: …` on a second line.
    public var line: String {
        let tag = switch status {
        case .ok: "ok     "
        case .warn: "warn   "
        case .fail: "FAIL   "
        case .skipped: "skipped"
        }
        var text = "\(tag) \(name): \(detail)"
        if let fix { text += "\n        fix: \(fix)" }
        return text
    }

    /// `{"check", "status", "detail", "fix"?}`.
    public var json: [String: Any] {
        var object: [String: Any] = ["check": name, "status": status.rawValue, "detail": detail]
        if let fix { object["fix"] = fix }
        return object
    }
}

/// The doctor's checks, in the order they ran.
public struct DoctorReport: Sendable {
    public var checks: [DoctorCheck] = []

    public init(checks: [DoctorCheck] = []) {
        self.checks = checks
    }

    mutating func add(_ name: String, _ status: DoctorCheck.Status, _ detail: String, fix: String? = nil) {
        checks.append(DoctorCheck(name: name, status: status, detail: detail, fix: fix))
    }

    /// Whether a check failed (the command then exits with 1).
    public var failed: Bool { checks.contains { $0.status == .fail } }

    /// `All checks passed.`, or `N problems, M warnings.`
    public var summary: String {
        let failed = checks.filter { $0.status == .fail }.count
        let warned = checks.filter { $0.status == .warn }.count
        return failed == 0 && warned == 0 ? "All checks passed."
            : "\(failed) problem\(failed == 1 ? "" : "s"), \(warned) warning\(warned == 1 ? "" : "s")."
    }

    /// One line per check, then the summary.
    public var text: String {
        (checks.map(\.line) + [summary]).joined(separator: "\n") + "\n"
    }

    /// The checks as a JSON array, pretty-printed, keys sorted.
    public func json() throws -> String {
        let data = try JSONSerialization.data(withJSONObject: checks.map(\.json), options: [.prettyPrinted, .sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }
}

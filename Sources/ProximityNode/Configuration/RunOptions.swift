import DBusKit
import Foundation
import StrictYAML
import Logging

/// The `proximityd run` options, each nil when not given: what the config file and the command
/// line both set (the file by the options' long names: `clear-interval`, `power-on`). Each is
/// declared in ``RunOption/all``, which says how it is read, checked, merged and applied.
///
/// The values are checked: build them with the `checked(…)` functions, which give the problem in
/// words that follow the option's name on the command line (`--max-peers: 0 is not between 1 and
/// 100000`) and in the config file (`FILE:3:12: max-peers: 0 is not between 1 and 100000`) alike.
public struct RunOptions: Sendable, Hashable {
    /// One option's value, of the type its ``RunOption`` declares (which requires it to be
    /// `Sendable` and `Hashable`).
    private struct Given: @unchecked Sendable, Hashable {
        let value: AnyHashable
    }

    /// Each option given, by its key (``RunOption/key``): an option is declared once, in
    /// ``RunOption/all``, and has no field here.
    private var values: [String: Given] = [:]

    public init() {}

    /// `option`'s value, nil when it was not given.
    public subscript<Value: Hashable & Sendable>(_ option: RunOption) -> Value? {
        get { self[key: option.key] }
        set { self[key: option.key] = newValue }
    }

    subscript<Value: Hashable & Sendable>(key key: String) -> Value? {
        get { values[key]?.value.base as? Value }
        set { values[key] = newValue.map { Given(value: AnyHashable($0)) } }
    }

    /// Whether `option` was given.
    public func has(_ option: RunOption) -> Bool { values[option.key] != nil }

    /// No option given.
    public var isEmpty: Bool { values.isEmpty }

    /// These options with `other`'s wherever `other` has one: the config file's, overridden by the
    /// command line's.
    public func overridden(by other: RunOptions) -> RunOptions {
        var merged = self
        merged.values.merge(other.values) { _, theirs in theirs }
        return merged
    }

    // MARK: - Checking values

    /// The path-loss exponents the distance model takes.
    public static let pathLossExponentRange: ClosedRange<Double> = 1.5...6
    /// The receiver offsets that may be set, dB: more than any adapter is off by.
    public static let rssiOffsetRange: ClosedRange<Double> = -40...40
    /// The found-devices table's caps that may be set.
    public static let maxPeersRange: ClosedRange<Int> = 1...100_000
    /// The longest node name: what a Bluetooth name holds.
    public static let maxNameLength = 248

    public static func checked(bus text: String) throws(OptionProblem) -> BusAddress {
        do { return try BusAddress(parsing: text) } catch { throw OptionProblem(error.message) }
    }

    public static func checked(busName text: String) throws(OptionProblem) -> BusName {
        do { return try BusName(text) } catch { throw OptionProblem("\(error)") }
    }

    public static func checked(stateDirectory text: String) throws(OptionProblem) -> String {
        guard !text.isEmpty else { throw OptionProblem("must not be empty") }
        return text
    }

    public static func checked(name text: String) throws(OptionProblem) -> String {
        guard !text.isEmpty, text.utf8.count <= maxNameLength, !text.utf8.contains(0) else {
            throw OptionProblem("must be 1 to \(maxNameLength) bytes of UTF-8 (the Bluetooth name limit)")
        }
        return text
    }

    public static func checked(serviceUUID text: String) throws(OptionProblem) -> UUID {
        guard let uuid = UUID(uuidString: text) else {
            throw OptionProblem("'\(text)' is not a UUID such as \(NodeConfiguration.defaultServiceUUID.lowercased)")
        }
        return uuid
    }

    /// `hci0`: lowercase letters, digits and `_`.
    public static func checked(adapter text: String) throws(OptionProblem) -> String {
        guard !text.isEmpty, text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x5f }) else {
            throw OptionProblem("'\(text)' is not an adapter name such as hci0")
        }
        return text
    }

    public static func checked(clearInterval seconds: Double) throws(OptionProblem) -> Double {
        guard NodeSettings.clearIntervalRange.contains(seconds) else {
            throw OptionProblem("\(show(seconds)) is not a number of seconds above 0 and at most 3600")
        }
        return seconds
    }

    /// Takes any integer, so that a value too large for the type is reported by its range.
    public static func checked(measuredPower dBm: Int) throws(OptionProblem) -> Int16 {
        let range = NodeSettings.measuredPowerRange
        guard let power = Int16(exactly: dBm), range.contains(power) else {
            throw OptionProblem("a measured power of \(dBm) dBm is outside \(range.lowerBound)…\(range.upperBound)")
        }
        return power
    }

    public static func checked(pathLossExponent n: Double) throws(OptionProblem) -> Double {
        guard pathLossExponentRange.contains(n) else {
            throw OptionProblem("\(show(n)) is not between \(show(pathLossExponentRange.lowerBound)) and " +
                "\(show(pathLossExponentRange.upperBound))")
        }
        return n
    }

    public static func checked(rssiOffset dB: Double) throws(OptionProblem) -> Double {
        guard dB.isFinite else { throw OptionProblem("an offset must be a finite number of dB, not \(show(dB))") }
        guard rssiOffsetRange.contains(dB) else {
            throw OptionProblem("an offset of \(show(dB)) dB is outside " +
                "\(show(rssiOffsetRange.lowerBound))…\(show(rssiOffsetRange.upperBound))")
        }
        return dB
    }

    public static func checked(maxPeers n: Int) throws(OptionProblem) -> Int {
        guard maxPeersRange.contains(n) else {
            throw OptionProblem("\(n) is not between \(maxPeersRange.lowerBound) and \(maxPeersRange.upperBound)")
        }
        return n
    }

    public static func checked(logLevel text: String) throws(OptionProblem) -> Logger.Level {
        guard let level = Logger.Level(rawValue: text) else {
            throw OptionProblem("'\(text)' is not one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return level
    }

    /// A number as a person writes it: `10`, not `10.0`; `2.5`; `nan`.
    public static func show(_ value: Double) -> String { YAMLNode.show(value) }
}

/// Why an option's value cannot be taken, in words that follow the option's name.
public struct OptionProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

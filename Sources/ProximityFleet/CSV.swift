import Foundation

/// CSV as RFC 4180 has it and as spreadsheets and Python's csv module write it: records end at
/// LF, CRLF or a lone CR (the last one may have no line end); commas separate fields; a field that
/// starts with a double quote runs to its closing quote and may hold commas, line breaks and
/// quotes (doubled); a UTF-8 byte order mark at the start is skipped. It reads bytes, not
/// Characters: to a Swift String "\r\n" is one Character, which a split on "\n" never finds.
/// Each record keeps the number of its first line, for `FILE:LINE: message`; one record is held
/// at a time, and every byte is looked at once.
public struct CSVReader {
    public struct Record: Sendable, Equatable {
        /// The line the record starts on, from 1.
        public var line: Int
        public var fields: [String]
        /// A `#` comment (with `comments`), its whole line in `fields[0]`.
        public var isComment = false

        /// No field holds more than spaces: an empty line, or `,,,` as spreadsheets write an
        /// empty row.
        public var isEmpty: Bool { !isComment && fields.allSatisfy { $0.allSatisfy { $0 == " " || $0 == "\t" } } }
    }

    public struct Problem: Error, Sendable {
        public var message: String
        /// The file could not be read at all (exit 66 rather than 65).
        public var unreadable = false
    }

    /// The largest file read, bytes.
    public static let maxSize = 2 << 30

    public let path: String
    /// A record that starts with `#` is a comment to the end of its line, quotes and all.
    public let comments: Bool
    /// The line the next record starts on.
    public private(set) var line = 1
    private let data: Data
    private var offset: Int

    /// The file at `path`, mapped rather than read where it can be.
    public init(path: String, comments: Bool = false) throws(Problem) {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path), options: .mappedIfSafe) } catch {
            throw Problem(message: "\(path): cannot read: \((error as NSError).localizedDescription)", unreadable: true)
        }
        guard data.count <= Self.maxSize else {
            throw Problem(message: "\(path): cannot read: larger than \(Self.maxSize >> 30) GiB", unreadable: true)
        }
        self.init(data, path: path, comments: comments)
    }

    public init(_ data: Data, path: String, comments: Bool = false) {
        self.data = data
        self.path = path
        self.comments = comments
        offset = data.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
    }

    /// `FILE:LINE: message`.
    public func problem(_ line: Int, _ message: String) -> Problem { Problem(message: "\(path):\(line): \(message)") }

    /// The next record, or nil at the end; a quoted field not closed by the end of the file is a
    /// problem at the line it opens on.
    public mutating func next() throws(Problem) -> Record? {
        guard offset < data.count else { return nil }
        let scan = data.withUnsafeBytes { Self.record($0, from: offset, comments: comments) }
        if let opened = scan.unclosed { throw problem(line + opened, "a quoted field opens on this line and is not closed") }
        let record = Record(line: line, fields: scan.fields, isComment: scan.isComment)
        offset = scan.end
        line += scan.lineBreaks
        return record
    }

    private static let (lf, cr, comma, quote, hash): (UInt8, UInt8, UInt8, UInt8, UInt8) = (0x0A, 0x0D, 0x2C, 0x22, 0x23)

    /// The record at `start`: its fields, where the next one starts, and the line breaks up to
    /// there (those in quoted fields too; CRLF is one). `unclosed`: a quoted field still open at
    /// the end of the file, as the line breaks before its opening quote.
    private static func record(_ bytes: UnsafeRawBufferPointer, from start: Int, comments: Bool)
        -> (fields: [String], isComment: Bool, end: Int, lineBreaks: Int, unclosed: Int?) {
        let n = bytes.count
        var i = start, lineBreaks = 0
        func text(_ range: Range<Int>) -> String { String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self) }
        /// To the line end at or after `i` (or the end), or to a comma first with `comma`.
        func skip(toComma comma: Bool) { while i < n, bytes[i] != lf, bytes[i] != cr, !(comma && bytes[i] == Self.comma) { i += 1 } }
        /// Past the line end at `i`, if any (the last record may have none).
        func pastLineEnd() {
            guard i < n else { return }
            i += bytes[i] == cr && i + 1 < n && bytes[i + 1] == lf ? 2 : 1
            lineBreaks += 1
        }
        if comments, bytes[start] == hash {
            skip(toComma: false)
            let line = text(start ..< i)
            pastLineEnd()
            return ([line], true, i, lineBreaks, nil)
        }
        var fields: [String] = []
        while true {
            if i < n, bytes[i] == quote {
                let opened = lineBreaks
                var field: [UInt8] = []
                i += 1
                while true {
                    guard i < n else { return (fields, false, i, lineBreaks, opened) }
                    let b = bytes[i]
                    i += 1
                    if b == quote {
                        guard i < n, bytes[i] == quote else { break }
                        i += 1
                    } else if b == lf || (b == cr && !(i < n && bytes[i] == lf)) {
                        lineBreaks += 1
                    }
                    field.append(b)
                }
                // Text after the closing quote, which RFC 4180 does not allow, is kept, as Python's
                // csv module keeps it: "a"b is ab.
                let rest = i
                skip(toComma: true)
                field += bytes[rest ..< i]
                fields.append(String(decoding: field, as: UTF8.self))
            } else {
                let s = i
                skip(toComma: true)
                fields.append(text(s ..< i))
            }
            guard i < n, bytes[i] == comma else { break }
            i += 1
        }
        pastLineEnd()
        return (fields, false, i, lineBreaks, nil)
    }
}

/// The rows a reader left out on purpose, counted by why, so that none goes in silence: the
/// commands say them on standard error.
public struct SkippedRows: Sendable {
    /// Each reason with its count, in the order first met.
    public private(set) var counts: [(reason: String, count: Int)] = []

    public init() {}

    public mutating func add(_ reason: String) {
        if let i = counts.firstIndex(where: { $0.reason == reason }) { counts[i].count += 1 } else { counts.append((reason, 1)) }
    }

    /// Counts `row` when it is a comment or empty, the rows every format here skips.
    public mutating func skips(_ row: CSVReader.Record) -> Bool {
        if row.isComment { add("commented out (#)") } else if row.isEmpty { add("empty") } else { return false }
        return true
    }

    /// `3 rows skipped: 2 empty, 1 commented out (#)`, or nil when none was.
    public var summary: String? {
        let total = counts.reduce(0) { $0 + $1.count }
        guard total > 0 else { return nil }
        return "\(total) row\(total == 1 ? "" : "s") skipped: " + counts.map { "\($0.count) \($0.reason)" }.joined(separator: ", ")
    }
}

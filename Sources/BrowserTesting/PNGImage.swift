import CZlib
import Foundation
import ProximityTesting

/// A PNG image read into memory, enough for a headless browser's screenshots: 8 bits per
/// channel, grey (0), RGB (2), grey and alpha (4) or RGBA (6), not interlaced. Anything else,
/// a bad signature or checksum, or data cut short is refused with a TestKitError. At most 64
/// Mpixels.
public struct PNGImage: Sendable {
    public let width: Int, height: Int
    /// Bytes per pixel: 1, 2, 3 or 4, for colour types 0, 4, 2 and 6.
    private let channels: Int
    /// The rows, unfiltered, without their filter bytes.
    private let pixels: [UInt8]

    private static let maxPixels = 64 << 20

    public init(data: Data) throws {
        let bytes = [UInt8](data)
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        guard bytes.count >= 8, Array(bytes[0..<8]) == signature else { throw TestKitError("PNG: bad signature") }
        func u32(_ at: Int) -> UInt32 {
            UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
        }

        var header: (width: Int, height: Int, channels: Int)?
        var compressed: [UInt8] = []
        var offset = 8
        var ended = false
        while !ended {
            guard offset + 12 <= bytes.count else { throw TestKitError("PNG: truncated (a chunk header at byte \(offset))") }
            let length = Int(u32(offset))
            let type = String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self)
            guard length <= bytes.count - offset - 12 else {
                throw TestKitError("PNG: truncated (chunk \(type) of \(length) bytes at byte \(offset))")
            }
            let body = offset + 8..<offset + 8 + length
            let crc = bytes[offset + 4..<body.upperBound].withUnsafeBufferPointer {
                UInt32(crc32(0, $0.baseAddress, uInt($0.count)))
            }
            guard crc == u32(body.upperBound) else { throw TestKitError("PNG: bad CRC in chunk \(type) at byte \(offset)") }
            guard header != nil || type == "IHDR" else { throw TestKitError("PNG: chunk \(type) before IHDR") }
            switch type {
            case "IHDR":
                guard header == nil, length == 13 else { throw TestKitError("PNG: misplaced or malformed IHDR") }
                let b = body.lowerBound
                let width = Int(u32(b)), height = Int(u32(b + 4))
                let (depth, colourType, compression, filter, interlace) = (bytes[b + 8], bytes[b + 9], bytes[b + 10],
                                                                           bytes[b + 11], bytes[b + 12])
                guard width > 0, height > 0, width <= Self.maxPixels, height <= Self.maxPixels, width * height <= Self.maxPixels else {
                    throw TestKitError("PNG: \(width)×\(height) pixels (at most \(Self.maxPixels))")
                }
                guard depth == 8 else { throw TestKitError("PNG: bit depth \(depth) (only 8 is read)") }
                let channels: Int
                switch colourType {
                case 0: channels = 1
                case 2: channels = 3
                case 4: channels = 2
                case 6: channels = 4
                case 3: throw TestKitError("PNG: colour type 3 (palette) is not read")
                default: throw TestKitError("PNG: unknown colour type \(colourType)")
                }
                guard compression == 0, filter == 0 else { throw TestKitError("PNG: unknown compression or filter method") }
                guard interlace == 0 else { throw TestKitError("PNG: interlaced (Adam7) images are not read") }
                header = (width, height, channels)
            case "IDAT":
                compressed += bytes[body]
            case "IEND":
                ended = true
            default:
                break
            }
            offset = body.upperBound + 4
        }
        guard let header else { throw TestKitError("PNG: no IHDR") }
        guard !compressed.isEmpty else { throw TestKitError("PNG: no image data") }

        let stride = header.width * header.channels
        let expected = header.height * (1 + stride)
        var raw = try Self.inflate(compressed, expected: expected)
        try Self.unfilter(&raw, rows: header.height, stride: stride, bytesPerPixel: header.channels)
        width = header.width
        height = header.height
        channels = header.channels
        var pixels = [UInt8](repeating: 0, count: header.height * stride)
        raw.withUnsafeBufferPointer { source in
            pixels.withUnsafeMutableBufferPointer { target in
                for y in 0..<header.height {
                    let from = source.baseAddress! + y * (stride + 1) + 1
                    (target.baseAddress! + y * stride).update(from: from, count: stride)
                }
            }
        }
        self.pixels = pixels
    }

    /// zlib's inflate of `compressed`, which must come to exactly `expected` bytes.
    private static func inflate(_ compressed: [UInt8], expected: Int) throws -> [UInt8] {
        // One byte more than expected, to tell too much data from just enough.
        var output = [UInt8](repeating: 0, count: expected + 1)
        var input = compressed
        var stream = z_stream()
        guard czlib_inflate_init(&stream) == Z_OK else { throw TestKitError("PNG: inflateInit failed") }
        defer { inflateEnd(&stream) }
        let status = input.withUnsafeMutableBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                stream.next_in = source.baseAddress
                stream.avail_in = uInt(source.count)
                stream.next_out = target.baseAddress
                stream.avail_out = uInt(target.count)
                return CZlib.inflate(&stream, Z_FINISH)
            }
        }
        let produced = Int(stream.total_out)
        guard produced <= expected else { throw TestKitError("PNG: more image data than \(expected) bytes") }
        switch status {
        case Z_STREAM_END:
            break
        case Z_BUF_ERROR where stream.avail_in == 0, Z_OK where stream.avail_in == 0:
            throw TestKitError("PNG: truncated image data (\(produced) of \(expected) bytes)")
        default:
            let message = stream.msg.map { String(cString: $0) } ?? "status \(status)"
            throw TestKitError("PNG: corrupt image data: \(message)")
        }
        guard produced == expected else { throw TestKitError("PNG: \(produced) bytes of image data, not \(expected)") }
        output.removeLast()
        return output
    }

    /// Undoes each row's filter in place (None, Sub, Up, Average, Paeth); rows keep their filter
    /// byte.
    private static func unfilter(_ raw: inout [UInt8], rows: Int, stride: Int, bytesPerPixel bpp: Int) throws {
        try raw.withUnsafeMutableBufferPointer { buffer in
            let p = buffer.baseAddress!
            for y in 0..<rows {
                let row = p + y * (stride + 1) + 1
                let above: UnsafeMutablePointer<UInt8>? = y > 0 ? row - (stride + 1) : nil
                switch row[-1] {
                case 0:
                    break
                case 1:
                    for i in bpp..<max(bpp, stride) { row[i] &+= row[i - bpp] }
                case 2:
                    guard let above else { break }
                    for i in 0..<stride { row[i] &+= above[i] }
                case 3:
                    for i in 0..<stride {
                        let left = i >= bpp ? Int(row[i - bpp]) : 0
                        let up = above.map { Int($0[i]) } ?? 0
                        row[i] &+= UInt8((left + up) / 2)
                    }
                case 4:
                    for i in 0..<stride {
                        let a = i >= bpp ? Int(row[i - bpp]) : 0
                        let b = above.map { Int($0[i]) } ?? 0
                        let c = i >= bpp ? above.map { Int($0[i - bpp]) } ?? 0 : 0
                        let estimate = a + b - c
                        let pa = abs(estimate - a), pb = abs(estimate - b), pc = abs(estimate - c)
                        row[i] &+= UInt8(pa <= pb && pa <= pc ? a : pb <= pc ? b : c)
                    }
                case let filter:
                    throw TestKitError("PNG: unknown filter type \(filter) in row \(y)")
                }
            }
        }
    }

    /// The pixel at (x, y) from the top left, as RGBA (alpha 255 for types without alpha).
    public func pixel(x: Int, y: Int) -> (r: UInt8, g: UInt8, b: UInt8, a: UInt8) {
        precondition(x >= 0 && x < width && y >= 0 && y < height, "pixel (\(x), \(y)) outside \(width)×\(height)")
        let i = (y * width + x) * channels
        switch channels {
        case 1: return (pixels[i], pixels[i], pixels[i], 255)
        case 2: return (pixels[i], pixels[i], pixels[i], pixels[i + 1])
        case 3: return (pixels[i], pixels[i + 1], pixels[i + 2], 255)
        default: return (pixels[i], pixels[i + 1], pixels[i + 2], pixels[i + 3])
        }
    }

    /// The pixel at index `i` (row by row) as one RGBA number.
    private func packed(_ i: Int) -> UInt32 {
        let p = pixel(x: i % width, y: i / width)
        return UInt32(p.r) << 24 | UInt32(p.g) << 16 | UInt32(p.b) << 8 | UInt32(p.a)
    }

    /// How many distinct colours (RGBA) the image has, counting at most `limit`.
    public func distinctColours(limit: Int = 1024) -> Int {
        var seen = Set<UInt32>()
        for i in 0..<width * height {
            seen.insert(packed(i))
            if seen.count >= limit { return limit }
        }
        return seen.count
    }

    /// The share of pixels (0...1) that differ from the pixel at (0, 0) — the page background —
    /// by more than `tolerance` in any channel.
    public func shareDifferingFromBackground(tolerance: UInt8 = 8) -> Double {
        let background = pixel(x: 0, y: 0)
        func far(_ a: UInt8, _ b: UInt8) -> Bool { (a > b ? a - b : b - a) > tolerance }
        var differing = 0
        for y in 0..<height {
            for x in 0..<width {
                let p = pixel(x: x, y: y)
                if far(p.r, background.r) || far(p.g, background.g) || far(p.b, background.b) || far(p.a, background.a) {
                    differing += 1
                }
            }
        }
        return Double(differing) / Double(width * height)
    }
}

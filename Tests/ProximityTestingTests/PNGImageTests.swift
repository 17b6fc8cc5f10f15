import Foundation
import ProximityTesting
import Testing
import BrowserTesting

/// A PNG writer for the tests, without zlib: the image data in stored (uncompressed) deflate
/// blocks, each row with the filter given for it.
private struct TestPNG {
    var width: Int
    var height: Int
    /// 0 grey, 2 RGB, 4 grey and alpha, 6 RGBA.
    var colourType: UInt8
    /// Row by row, `channels` bytes a pixel.
    var pixels: [UInt8]
    var depth: UInt8 = 8
    var interlace: UInt8 = 0
    /// The filter of row y is filters[y % filters.count].
    var filters: [UInt8] = [0, 1, 2, 3, 4]
    /// The zlib stream is cut into this many IDAT chunks.
    var idatChunks = 1

    var channels: Int { [0: 1, 2: 3, 4: 2, 6: 4][colourType]! }

    /// Each row's filter byte and its bytes filtered.
    func filtered() -> [UInt8] {
        let stride = width * channels, bpp = channels
        var out: [UInt8] = []
        for y in 0..<height {
            let filter = filters[y % filters.count]
            out.append(filter)
            let row = Array(pixels[y * stride..<(y + 1) * stride])
            let above = y > 0 ? Array(pixels[(y - 1) * stride..<y * stride]) : [UInt8](repeating: 0, count: stride)
            for i in 0..<stride {
                let a = i >= bpp ? Int(row[i - bpp]) : 0, b = Int(above[i]), c = i >= bpp ? Int(above[i - bpp]) : 0
                let predicted: Int
                switch filter {
                case 0: predicted = 0
                case 1: predicted = a
                case 2: predicted = b
                case 3: predicted = (a + b) / 2
                default:
                    let p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c)
                    predicted = pa <= pb && pa <= pc ? a : pb <= pc ? b : c
                }
                out.append(row[i] &- UInt8(predicted))
            }
        }
        return out
    }

    /// A zlib stream of stored blocks (at most 65,535 bytes each).
    static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let n = min(65535, data.count - offset)
            out.append(offset + n == data.count ? 1 : 0)
            out += [UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8((~n >> 8) & 0xFF)]
            out += data[offset..<offset + n]
            offset += n
        } while offset < data.count
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return out + bigEndian(b << 16 | a)
    }

    static func bigEndian(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    static func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + body
        return bigEndian(UInt32(body.count)) + typed + bigEndian(crc32(typed))
    }

    func encoded(data: [UInt8]? = nil) -> [UInt8] {
        let header = Self.bigEndian(UInt32(width)) + Self.bigEndian(UInt32(height)) + [depth, colourType, 0, 0, interlace]
        let stream = Self.zlibStored(data ?? filtered())
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Self.chunk("IHDR", header)
        png += Self.chunk("tEXt", Array("Comment\0made by the tests".utf8))
        let size = (stream.count + idatChunks - 1) / idatChunks
        for start in Swift.stride(from: 0, to: stream.count, by: size) {
            png += Self.chunk("IDAT", Array(stream[start..<min(start + size, stream.count)]))
        }
        return png + Self.chunk("IEND", [])
    }

    var data: Data { Data(encoded()) }

    /// A pattern with every channel varying in x and y (and wrapping), so that each filter's
    /// arithmetic is exercised.
    static func pattern(width: Int, height: Int, channels: Int) -> [UInt8] {
        var pixels: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width {
                for c in 0..<channels { pixels.append(UInt8((x * 37 + y * 91 + c * 53 + x * y * 7) & 0xFF)) }
            }
        }
        return pixels
    }
}

private func expectPixels(_ image: PNGImage, _ source: TestPNG, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(image.width == source.width && image.height == source.height, sourceLocation: sourceLocation)
    var wrong = 0
    for y in 0..<source.height {
        for x in 0..<source.width {
            let i = (y * source.width + x) * source.channels
            let p = source.pixels
            let expected: (UInt8, UInt8, UInt8, UInt8)
            switch source.colourType {
            case 0: expected = (p[i], p[i], p[i], 255)
            case 2: expected = (p[i], p[i + 1], p[i + 2], 255)
            case 4: expected = (p[i], p[i], p[i], p[i + 1])
            default: expected = (p[i], p[i + 1], p[i + 2], p[i + 3])
            }
            if image.pixel(x: x, y: y) != expected {
                if wrong < 5 { Issue.record("pixel (\(x), \(y)) is \(image.pixel(x: x, y: y)), not \(expected)", sourceLocation: sourceLocation) }
                wrong += 1
            }
        }
    }
    #expect(wrong == 0, sourceLocation: sourceLocation)
}

@Suite("PNGImage")
struct PNGImageTests {
    @Test("RGB and RGBA, every filter (None, Sub, Up, Average, Paeth), read pixel for pixel",
          arguments: [UInt8(2), 6])
    func everyFilter(colourType: UInt8) throws {
        let channels = colourType == 2 ? 3 : 4
        // Each row's filter in turn, also after each other one.
        let filters: [UInt8] = [0, 1, 2, 3, 4, 4, 3, 2, 1, 0, 2, 4, 1, 3, 0, 3, 1, 4, 2]
        let png = TestPNG(width: 7, height: filters.count, colourType: colourType,
                          pixels: TestPNG.pattern(width: 7, height: filters.count, channels: channels), filters: filters)
        expectPixels(try PNGImage(data: png.data), png)
    }

    @Test("grey and grey with alpha", arguments: [UInt8(0), 4])
    func grey(colourType: UInt8) throws {
        let channels = colourType == 0 ? 1 : 2
        let png = TestPNG(width: 5, height: 10, colourType: colourType, pixels: TestPNG.pattern(width: 5, height: 10, channels: channels))
        expectPixels(try PNGImage(data: png.data), png)
    }

    @Test("a larger image: several stored blocks, the stream cut into several IDAT chunks")
    func larger() throws {
        let png = TestPNG(width: 300, height: 100, colourType: 6, pixels: TestPNG.pattern(width: 300, height: 100, channels: 4),
                          filters: [4, 1, 0, 3, 2, 2], idatChunks: 3)
        #expect(png.filtered().count > 65535)
        expectPixels(try PNGImage(data: png.data), png)
    }

    @Test("distinct colours, and the share differing from the background")
    func statistics() throws {
        // 10×10 white, a 4×5 red block, one near-white pixel within the tolerance.
        var pixels = [UInt8](repeating: 255, count: 10 * 10 * 3)
        for y in 2..<7 {
            for x in 3..<7 { pixels.replaceSubrange((y * 10 + x) * 3..<(y * 10 + x) * 3 + 3, with: [220, 10, 20]) }
        }
        pixels.replaceSubrange((9 * 10 + 9) * 3..<(9 * 10 + 9) * 3 + 3, with: [250, 250, 250])
        let image = try PNGImage(data: TestPNG(width: 10, height: 10, colourType: 2, pixels: pixels).data)
        #expect(image.distinctColours() == 3)
        #expect(image.distinctColours(limit: 2) == 2)
        #expect(image.shareDifferingFromBackground() == 0.2)
        #expect(image.shareDifferingFromBackground(tolerance: 4) == 0.21)
        #expect(image.pixel(x: 4, y: 3) == (220, 10, 20, 255))
    }

    @Test("refused: bad signature, truncated, interlaced, 16-bit, palette, bad CRC, too much or too little data")
    func refused() throws {
        let good = TestPNG(width: 4, height: 3, colourType: 2, pixels: TestPNG.pattern(width: 4, height: 3, channels: 3))
        let bytes = good.encoded()
        func refusal(_ data: [UInt8]) -> String? {
            do {
                _ = try PNGImage(data: Data(data))
                return nil
            } catch {
                #expect(error is TestKitError)
                return "\(error)"
            }
        }
        #expect(refusal(bytes) == nil)

        var signature = bytes
        signature[1] = 0x51
        #expect(refusal(signature)?.contains("signature") == true)
        #expect(refusal([]) != nil)
        for cut in [5, 20, 40, bytes.count - 12, bytes.count - 1] {
            #expect(refusal(Array(bytes.prefix(cut))) != nil, "cut at \(cut)")
        }
        #expect(refusal(Array(bytes.prefix(bytes.count - 12)))?.contains("truncated") == true)

        var interlaced = good
        interlaced.interlace = 1
        #expect(refusal(interlaced.encoded())?.contains("interlaced") == true)
        var sixteen = good
        sixteen.depth = 16
        #expect(refusal(sixteen.encoded())?.contains("bit depth 16") == true)
        var palette = good
        palette.colourType = 3
        #expect(refusal(palette.encoded(data: good.filtered()))?.contains("palette") == true)

        var crc = bytes
        crc[8 + 8 + 5] ^= 1  // a byte of IHDR's body
        #expect(refusal(crc)?.contains("CRC") == true)

        let rows = good.filtered()
        #expect(refusal(good.encoded(data: rows + [0, 1, 2, 3]))?.contains("more image data") == true)
        #expect(refusal(good.encoded(data: Array(rows.dropLast(2)))) != nil)
        var filter = rows
        filter[0] = 7
        #expect(refusal(good.encoded(data: filter))?.contains("filter type 7") == true)
    }
}

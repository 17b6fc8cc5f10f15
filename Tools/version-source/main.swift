// version-source VERSION-FILE OUTPUT: writes OUTPUT, a Swift file that sets
// ProximitydVersion.string to the version in VERSION-FILE (its first line). The build runs it
// through Plugins/VersionFile; it refuses a version Debian would not take (Debian policy 5.6.12:
// an upstream version starts with a digit and holds only alphanumerics and . + ~ -).
import Foundation

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: version-source VERSION-FILE OUTPUT\n".utf8))
    exit(64)
}
let path = arguments[1]
guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
    FileHandle.standardError.write(Data("\(path): error: cannot read the version file\n".utf8))
    exit(66)
}
let version = String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
    .trimmingCharacters(in: .whitespaces)
let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.+~-")
guard let first = version.first, first.isASCII, first.isNumber, version.count <= 64,
      version.allSatisfy({ allowed.contains($0) }) else {
    FileHandle.standardError.write(Data("""
        \(path):1:1: error: "\(version)" is not a version: it must start with a digit and hold only \
        letters, digits and . + ~ - (Debian policy 5.6.12), at most 64 characters

        """.utf8))
    exit(65)
}
let source = """
    // Generated from VERSION by Plugins/VersionFile at build time; do not edit.
    extension ProximitydVersion {
        public static let string = "\(version)"
    }

    """
// Rewrite only on a change, so that an unchanged version does not rebuild its dependants.
let output = arguments[2]
if (try? String(contentsOfFile: output, encoding: .utf8)) != source {
    do {
        try source.write(toFile: output, atomically: true, encoding: .utf8)
    } catch {
        FileHandle.standardError.write(Data("\(output): error: cannot write: \(error)\n".utf8))
        exit(73)
    }
}

/// The bounds a YAML document must keep before anything is built from it, so that a hostile or
/// broken file costs its reader little time and memory (the daemon's config file through
/// `check-config`, SIGHUP and `Reload()`; the simulator's scenarios):
///
/// - at most ``maxSize`` bytes, refused by the reader before the file is parsed;
/// - collections nested at most ``maxDepth`` deep, checked on the text before YAML composes it
///   (the composer recurses once per level);
/// - at most ``maxValues`` values once YAML aliases are expanded, counted while the tree is
///   converted (a "billion laughs" file of 441 bytes, 8 levels of 10 aliases, stands for 10⁸
///   values).
public enum YAMLLimits {
    /// The largest file a reader takes, bytes: 1 MiB. About 10,900 regions written one a line
    /// (`- { identifier: r000001, match: { uuid: …, major: 1 } }`), more than a file written by
    /// hand holds; thousands of regions more belong over D-Bus (`StartMonitoring`), which
    /// max-regions bounds. Refusing a file of this size costs the daemon about 0.4 s and no
    /// lasting memory (docs/reliability.md, "Bounded memory"); at 4 MiB it cost 1.4 s and 60 MB.
    public static let maxSize = 1 << 20
    /// Collections inside collections, block and flow together.
    public static let maxDepth = 64
    /// Scalars and collections, with each alias counted as the whole value it names. The largest
    /// config file the limits allow otherwise (1000 alerts, 1000 rules, 100 000 regions at
    /// max-regions' top) needs far fewer than this per region; a file of tens of thousands of
    /// regions belongs over D-Bus anyway.
    public static let maxValues = 1_000_000

    /// The first place where the text nests collections more than ``maxDepth`` deep, or nil.
    ///
    /// A light scan, not a YAML parser: the depth of a line's block content is the number of
    /// indentation levels open above it plus its leading `- ` and `? ` indicators; flow
    /// collections add one level per `[` or `{` that opens one (at the start of a value, or
    /// anywhere inside a flow collection). Quoted scalars, comments and the lines of block
    /// scalars (`|`, `>`) are skipped. It may overestimate only for a file whose plain scalars
    /// hold unbalanced brackets inside flow collections, which YAML does not allow anyway.
    public static func firstTooDeep(_ scalars: [Unicode.Scalar]) -> YAMLPosition? {
        var indents: [Int] = []          // the indentation of each open block level
        var flow = 0                     // open flow collections
        var quote: Unicode.Scalar?       // inside a quoted scalar, which may span lines
        var blockScalarParent: Int?      // inside a block scalar: the indentation of its key's line
        var line = 1
        var i = 0
        let count = scalars.count
        while i < count {
            // One line: [i, end).
            var end = i
            while end < count, !isBreak(scalars[end]) { end += 1 }
            var indent = 0
            while i + indent < end, scalars[i + indent] == " " { indent += 1 }
            let blank = i + indent == end || scalars[i + indent] == "#"
            if let parent = blockScalarParent {
                if blank || indent > parent { i = nextLine(after: end, in: scalars); line += 1; continue }
                blockScalarParent = nil
            }
            var j = i + indent
            var depth = indents.count + flow
            if quote == nil, flow == 0, !blank {
                // Block structure: close the levels this line is not inside, open its own.
                while let last = indents.last, last >= indent { indents.removeLast() }
                indents.append(indent)
                depth = indents.count
                // `- - - x` and `? x` nest on one line.
                while j + 1 < end, scalars[j] == "-" || scalars[j] == "?", scalars[j + 1] == " " {
                    depth += 1
                    j += 2
                    while j < end, scalars[j] == " " { j += 1 }
                }
                if depth > maxDepth { return YAMLPosition(line: line, column: j - i + 1) }
            }
            var valueStart = true        // at a place where a value may begin
            var lastSignificant: Unicode.Scalar?
            while j < end {
                let c = scalars[j]
                if let q = quote {
                    if q == "\"", c == "\\" { j += 2; continue }
                    if c == q {
                        if q == "'", j + 1 < end, scalars[j + 1] == "'" { j += 2; continue }
                        quote = nil
                        valueStart = false
                    }
                    j += 1
                    continue
                }
                switch c {
                case "#" where j == i || scalars[j - 1] == " " || scalars[j - 1] == "\t":
                    j = end
                    continue
                case "\"", "'":
                    if valueStart { quote = c }
                case "[", "{":
                    if valueStart || flow > 0 {
                        flow += 1
                        depth += 1
                        if depth > maxDepth { return YAMLPosition(line: line, column: j - i + 1) }
                        valueStart = true
                        lastSignificant = c
                        j += 1
                        continue
                    }
                case "]", "}":
                    if flow > 0 {
                        flow -= 1
                        depth -= 1
                    }
                case ",":
                    if flow > 0 { valueStart = true; lastSignificant = c; j += 1; continue }
                case ":" where j + 1 == end || scalars[j + 1] == " " || flow > 0:
                    valueStart = true
                    lastSignificant = c
                    j += 1
                    continue
                case " ", "\t":
                    j += 1
                    continue
                default:
                    break
                }
                valueStart = false
                lastSignificant = c
                j += 1
            }
            // `key: |`, `- >-`, …: the lines below, more indented, are text.
            if quote == nil, flow == 0, let last = lastSignificant, last != ":" {
                var k = end - 1
                while k > i, scalars[k] == " " { k -= 1 }
                var l = k
                while l > i, "+-0123456789".unicodeScalars.contains(scalars[l]) { l -= 1 }
                if scalars[l] == "|" || scalars[l] == ">", l == i + indent || scalars[l - 1] == " " {
                    blockScalarParent = indent
                }
            }
            i = nextLine(after: end, in: scalars)
            line += 1
        }
        return nil
    }

    private static func nextLine(after end: Int, in scalars: [Unicode.Scalar]) -> Int {
        guard end < scalars.count else { return end }
        if scalars[end] == "\r", end + 1 < scalars.count, scalars[end + 1] == "\n" { return end + 2 }
        return end + 1
    }

    private static func isBreak(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\n" || scalar == "\r" || scalar == "\u{85}" || scalar == "\u{2028}" || scalar == "\u{2029}"
    }
}

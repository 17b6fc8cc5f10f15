import CDBus
import Glibc

/// Moves values between ``DBusValue`` and libdbus messages (`DBusMessageIter`).
///
/// Reading is guided by the message's signature, parsed once per distinct signature and cached as a
/// ``Signature`` (types and text), so an empty array still knows its element type and no
/// per-message signature text is rebuilt. A variant holding a basic type (or an array of one) is
/// typed from its type code; only other containers in variants cost a signature string. Used only
/// on the bus thread (the cache is not locked).
final class Marshaller {
    private var signatureCache: [String: Signature] = [:]

    /// A signature libdbus already validated, parsed through the cache.
    func signature(forRaw raw: UnsafePointer<CChar>) -> Signature {
        let key = String(cString: raw)
        if let cached = signatureCache[key] { return cached }
        // libdbus validated it; a parse failure would be a bug in one of the two parsers.
        let parsed = (try? Signature(key)) ?? .empty
        if signatureCache.count > 4096 { signatureCache.removeAll(keepingCapacity: true) }
        signatureCache[key] = parsed
        return parsed
    }

    /// The types of a signature libdbus already validated, through the cache.
    func types(forSignature raw: UnsafePointer<CChar>) -> [DBusType] {
        signature(forRaw: raw).types
    }

    // MARK: Reading

    /// What is left of the read's ``DBusReceiveLimits`` (values, then string bytes); nil while
    /// reading without limits.
    private var budget: (values: Int, stringBytes: Int)?
    /// Set when the read ran out of its budget: it stopped there, holding no more.
    private var overBudget = false

    /// All arguments of `message`, whose signature is `types` (from ``signature(forRaw:)``). With
    /// `limits`, nil once the body holds more than they allow: the read stops at the first value
    /// or string past either bound, before it is copied, so what it held is bounded too.
    func readBody(_ message: OpaquePointer, types: [DBusType], limits: DBusReceiveLimits? = nil) -> [DBusValue]? {
        if types.isEmpty { return [] }
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
        budget = limits.map { ($0.maxValues, $0.maxStringBytes) }
        overBudget = false
        defer { budget = nil }
        var out: [DBusValue] = []
        out.reserveCapacity(types.count)
        for (i, type) in types.enumerated() {
            out.append(read(&iter, as: type))
            if overBudget { return nil }
            if i < types.count - 1 { dbus_message_iter_next(&iter) }
        }
        return out
    }

    /// Takes `values` values and `bytes` string bytes from the budget; false (and the read over)
    /// when they are not there.
    @inline(__always)
    private func spend(values: Int, bytes: Int = 0) -> Bool {
        guard var left = budget else { return true }
        if overBudget { return false }
        left.values -= values
        left.stringBytes -= bytes
        budget = left
        if left.values < 0 || left.stringBytes < 0 { overBudget = true }
        return !overBudget
    }

    /// The type of a basic value, or of a variant, from its type code; nil for the other containers
    /// (array, struct, dict entry) and for `INVALID`.
    private static func basicType(_ code: Int32) -> DBusType? {
        switch code {
        case CDBUS_TYPE_BYTE: .byte
        case CDBUS_TYPE_BOOLEAN: .boolean
        case CDBUS_TYPE_INT16: .int16
        case CDBUS_TYPE_UINT16: .uint16
        case CDBUS_TYPE_INT32: .int32
        case CDBUS_TYPE_UINT32: .uint32
        case CDBUS_TYPE_INT64: .int64
        case CDBUS_TYPE_UINT64: .uint64
        case CDBUS_TYPE_DOUBLE: .double
        case CDBUS_TYPE_STRING: .string
        case CDBUS_TYPE_OBJECT_PATH: .objectPath
        case CDBUS_TYPE_SIGNATURE: .signature
        case CDBUS_TYPE_UNIX_FD: .unixFD
        case CDBUS_TYPE_VARIANT: .variant
        default: nil
        }
    }

    /// The complete type of the value inside a variant, positioned at by `sub`. Basic types,
    /// variants and arrays of those come from type codes; other containers from the signature.
    private func variantContentType(_ sub: inout DBusMessageIter) -> DBusType? {
        let code = dbus_message_iter_get_arg_type(&sub)
        if let basic = Self.basicType(code) { return basic }
        if code == CDBUS_TYPE_ARRAY, let element = Self.basicType(dbus_message_iter_get_element_type(&sub)) {
            return .array(element)
        }
        guard code != CDBUS_TYPE_INVALID, let raw = dbus_message_iter_get_signature(&sub) else { return nil }
        defer { dbus_free(raw) }
        return types(forSignature: raw).first
    }

    private func read(_ iter: inout DBusMessageIter, as type: DBusType) -> DBusValue {
        guard spend(values: 1) else { return .boolean(false) }
        switch type {
        case .byte:
            var v: UInt8 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .byte(v)
        case .boolean:
            var v: dbus_bool_t = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .boolean(v != 0)
        case .int16:
            var v: Int16 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .int16(v)
        case .uint16:
            var v: UInt16 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .uint16(v)
        case .int32:
            var v: Int32 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .int32(v)
        case .uint32:
            var v: UInt32 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .uint32(v)
        case .int64:
            var v: Int64 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .int64(v)
        case .uint64:
            var v: UInt64 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .uint64(v)
        case .double:
            var v: Double = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .double(v)
        case .string:
            return .string(readString(&iter))
        case .objectPath:
            return .objectPath(ObjectPath(unchecked: readString(&iter)))
        case .signature:
            let raw = readString(&iter)
            return .signature((try? Signature(raw)) ?? .empty)
        case .unixFD:
            // libdbus returns a dup()ed descriptor that the caller owns.
            var fd: Int32 = -1
            dbus_message_iter_get_basic(&iter, &fd)
            return .unixFD(UnixFD(taking: fd))
        case .array(let element):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            if element == .byte {
                var pointer: UnsafeMutableRawPointer? = nil
                var count: Int32 = 0
                withUnsafeMutablePointer(to: &pointer) { pp in
                    dbus_message_iter_get_fixed_array(&sub, pp, &count)
                }
                var items: [DBusValue] = []
                // A byte array counts as its bytes, as a string does (it is data, not values).
                guard spend(values: 0, bytes: Int(count)) else { return .array(element: .byte, []) }
                if let base = pointer?.assumingMemoryBound(to: UInt8.self), count > 0 {
                    items.reserveCapacity(Int(count))
                    for i in 0..<Int(count) { items.append(.byte(base[i])) }
                }
                return .array(element: .byte, items)
            }
            var items: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != CDBUS_TYPE_INVALID, !overBudget {
                items.append(read(&sub, as: element))
                dbus_message_iter_next(&sub)
            }
            return .array(element: element, items)
        case .dictionary(let keyType, let valueType):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            var entries: [DBusValue.DictEntry] = []
            while dbus_message_iter_get_arg_type(&sub) == CDBUS_TYPE_DICT_ENTRY, !overBudget {
                var entry = DBusMessageIter()
                dbus_message_iter_recurse(&sub, &entry)
                let key = read(&entry, as: keyType)
                dbus_message_iter_next(&entry)
                let value = read(&entry, as: valueType)
                entries.append(.init(key, value))
                dbus_message_iter_next(&sub)
            }
            return .dictionary(key: keyType, value: valueType, entries)
        case .structure(let fields):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            var values: [DBusValue] = []
            values.reserveCapacity(fields.count)
            for (i, field) in fields.enumerated() {
                values.append(read(&sub, as: field))
                if i < fields.count - 1 { dbus_message_iter_next(&sub) }
            }
            return .structure(values)
        case .variant:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            guard let innerType = variantContentType(&sub) else { return .variant(.string("")) }
            return .variant(read(&sub, as: innerType))
        }
    }

    private func readString(_ iter: inout DBusMessageIter) -> String {
        var p: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&iter, &p)
        guard let p else { return "" }
        if budget != nil, !spend(values: 0, bytes: strlen(p)) { return "" }
        return String(cString: p)
    }

    // MARK: Writing

    /// Appends `values` to `message`. Fails (false) only when a value does not conform to its own
    /// type or carries a string with a NUL byte, both checked before libdbus sees anything, or when
    /// libdbus is out of memory.
    func appendBody(_ values: [DBusValue], to message: OpaquePointer) -> Bool {
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(message, &iter)
        for value in values {
            guard append(value, to: &iter) else { return false }
        }
        return true
    }

    private func append(_ value: DBusValue, to iter: inout DBusMessageIter) -> Bool {
        switch value {
        case .byte(var v): return dbus_message_iter_append_basic(&iter, CDBUS_TYPE_BYTE, &v) != 0
        case .boolean(let b):
            var v: dbus_bool_t = b ? 1 : 0
            return dbus_message_iter_append_basic(&iter, CDBUS_TYPE_BOOLEAN, &v) != 0
        case .int16(var v): return dbus_message_iter_append_basic(&iter, CDBUS_TYPE_INT16, &v) != 0
        case .uint16(var v): return dbus_message_iter_append_basic(&iter, CDBUS_TYPE_UINT16, &v) != 0
        case .int32(var v): return dbus_message_iter_append_basic(&iter, CDBUS_TYPE_INT32, &v) != 0
        case .uint32(var v): return dbus_message_iter_append_basic(&iter, CDBUS_TYPE_UINT32, &v) != 0
        case .int64(var v): return dbus_message_iter_append_basic(&iter, CDBUS_TYPE_INT64, &v) != 0
        case .uint64(var v): return dbus_message_iter_append_basic(&iter, CDBUS_TYPE_UINT64, &v) != 0
        case .double(var v): return dbus_message_iter_append_basic(&iter, CDBUS_TYPE_DOUBLE, &v) != 0
        case .string(let s):
            guard !s.utf8.contains(0) else { return false }
            return appendString(s, type: CDBUS_TYPE_STRING, to: &iter)
        case .objectPath(let p): return appendString(p.rawValue, type: CDBUS_TYPE_OBJECT_PATH, to: &iter)
        case .signature(let s): return appendString(s.rawValue, type: CDBUS_TYPE_SIGNATURE, to: &iter)
        case .unixFD(let fd):
            // libdbus dup()s the descriptor; ours stays open and owned by `fd`.
            var raw = fd.rawValue
            return dbus_message_iter_append_basic(&iter, CDBUS_TYPE_UNIX_FD, &raw) != 0
        case .variant(let inner):
            return container(CDBUS_TYPE_VARIANT, signature: inner.type.description, in: &iter) { sub in
                append(inner, to: &sub)
            }
        case .array(let element, let items):
            return container(CDBUS_TYPE_ARRAY, signature: element.description, in: &iter) { sub in
                if element == .byte {
                    var bytes: [UInt8] = []
                    bytes.reserveCapacity(items.count)
                    for item in items {
                        guard case .byte(let b) = item else { return false }
                        bytes.append(b)
                    }
                    return bytes.withUnsafeBufferPointer { buffer in
                        var base = buffer.baseAddress ?? UnsafePointer(bitPattern: 1)
                        return dbus_message_iter_append_fixed_array(&sub, CDBUS_TYPE_BYTE, &base, Int32(buffer.count)) != 0
                    }
                }
                for item in items {
                    guard item.conformsShallow(to: element), append(item, to: &sub) else { return false }
                }
                return true
            }
        case .dictionary(let keyType, let valueType, let entries):
            guard keyType.isBasic else { return false }
            let entrySignature = "{" + keyType.description + valueType.description + "}"
            return container(CDBUS_TYPE_ARRAY, signature: entrySignature, in: &iter) { sub in
                for entry in entries {
                    guard entry.key.conformsShallow(to: keyType), entry.value.conformsShallow(to: valueType) else { return false }
                    let ok = container(CDBUS_TYPE_DICT_ENTRY, signature: nil, in: &sub) { e in
                        append(entry.key, to: &e) && append(entry.value, to: &e)
                    }
                    guard ok else { return false }
                }
                return true
            }
        case .structure(let fields):
            guard !fields.isEmpty else { return false }
            return container(CDBUS_TYPE_STRUCT, signature: nil, in: &iter) { sub in
                fields.allSatisfy { append($0, to: &sub) }
            }
        }
    }

    private func appendString(_ s: String, type: Int32, to iter: inout DBusMessageIter) -> Bool {
        s.withCString { p in
            var pointer: UnsafePointer<CChar>? = p
            return dbus_message_iter_append_basic(&iter, type, &pointer) != 0
        }
    }

    /// Opens a container, fills it, and closes it; abandons it if filling failed so the message is
    /// left consistent for libdbus to free.
    private func container(_ type: Int32, signature: String?, in iter: inout DBusMessageIter,
                           _ fill: (inout DBusMessageIter) -> Bool) -> Bool {
        var sub = DBusMessageIter()
        let opened: dbus_bool_t
        if let signature {
            opened = signature.withCString { dbus_message_iter_open_container(&iter, type, $0, &sub) }
        } else {
            opened = dbus_message_iter_open_container(&iter, type, nil, &sub)
        }
        guard opened != 0 else { return false }
        guard fill(&sub) else {
            dbus_message_iter_abandon_container(&iter, &sub)
            return false
        }
        return dbus_message_iter_close_container(&iter, &sub) != 0
    }
}

extension DBusValue {
    /// The element's own type equals `type`; its insides are checked as they are appended.
    func conformsShallow(to type: DBusType) -> Bool {
        switch (self, type) {
        case (.array(let e, _), .array(let t)): return e == t
        case (.dictionary(let k, let v, _), .dictionary(let tk, let tv)): return k == tk && v == tv
        case (.structure(let fields), .structure(let types)):
            return fields.count == types.count && zip(fields, types).allSatisfy { $0.conformsShallow(to: $1) }
        default: return self.type == type
        }
    }
}

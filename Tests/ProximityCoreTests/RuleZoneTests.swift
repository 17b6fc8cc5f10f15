import ProximityCore
import Testing

/// Zones in rules: `within`, and zone names compared with the tracker's prox numbers (0 unknown,
/// 1 immediate, 2 near, 3 far), so "near or nearer, and known" needs no arithmetic.
@Suite struct RuleZoneTests {
    static func test(_ op: RuleOperator, _ values: [String]) -> RuleCondition { .test(key: "a.beacon.prox", op: op, values: values) }

    /// The prox values the tracker sets, a zone's name as a client may set it, and a missing value.
    static let values: [String?] = ["0", "1", "2", "3", "near", "unknown", nil]

    @Test("each test of zones against 0, 1, 2, 3, \"near\", \"unknown\" and a missing value", arguments: [
        (RuleOperator.within, ["near"], [false, true, true, false, true, false, false]),
        (.within, ["immediate"], [false, true, false, false, false, false, false]),
        (.within, ["far"], [false, true, true, true, true, false, false]),
        (.within, ["immediate", "near"], [false, true, true, false, true, false, false]),
        (.eq, ["near"], [false, false, true, false, true, false, false]),
        (.eq, ["unknown"], [true, false, false, false, false, true, false]),
        (.eq, ["near", "immediate"], [false, true, true, false, true, false, false]),
        (.ne, ["near"], [true, true, false, true, false, true, true]),
        (.eq, ["2"], [false, false, true, false, true, false, false]),
        (.le, ["2"], [true, true, true, false, false, false, false]),
    ])
    func zones(_ op: RuleOperator, _ values: [String], _ expected: [Bool]) {
        for (value, holds) in zip(Self.values, expected) {
            #expect(Self.test(op, values).holds { _ in value } == holds, "\(value ?? "missing") \(op.rawValue) \(values)")
        }
    }

    @Test("zone names compare only with zones: other text and other numbers compare as before")
    func onlyZones() {
        #expect(!RuleCondition.test(key: "k", op: .eq, values: ["near"]).holds { _ in "4" })
        #expect(!RuleCondition.test(key: "k", op: .eq, values: ["near"]).holds { _ in "Near" })
        #expect(RuleCondition.test(key: "k", op: .eq, values: ["2.0"]).holds { _ in "2" })
        #expect(!RuleCondition.test(key: "k", op: .within, values: ["far"]).holds { _ in "nearby" })
        #expect(RuleOperator.zone("2") == .near && RuleOperator.zone("0") == .unknown && RuleOperator.zone("4") == nil && RuleOperator.zone("NEAR") == nil)
    }

    @Test("within takes immediate, near or far; gt, ge, lt and le refuse a zone's name and point to within")
    func refused() throws {
        let cases: [(String, String)] = [
            (#"{"key": "a.beacon.prox", "op": "within", "value": 2}"#, "when: within takes a zone, immediate, near or far, not \"2\""),
            (#"{"key": "a.beacon.prox", "op": "within", "value": "unknown"}"#, "when: within takes a zone, immediate, near or far, not \"unknown\""),
            (#"{"key": "a.beacon.prox", "op": "within"}"#, "when: within needs value: or values:"),
            (#"{"key": "a.beacon.prox", "op": "le", "value": "near"}"#,
             "when: le compares numbers: \"near\" is not a number (for a zone or nearer, and known, write op: within, value: near)"),
        ]
        for (test, message) in cases {
            let text = #"{"when": \#(test), "do": [{"log": {}}]}"#
            do {
                _ = try Rule.parse(identifier: "r", RuleValue.json(text))
                Issue.record("\(test) was taken")
            } catch { #expect(error.description == message) }
        }
        let rule = try Rule.parse(identifier: "r", RuleValue.json(#"{"when": {"key": "a.beacon.prox", "op": "within", "value": "near"}, "do": [{"log": {}}]}"#))
        #expect(try Rule.parse(identifier: "r", rule.definition) == rule)
    }

    @Test("TestRule's explanation names the zone a prox number stands for")
    func explained() {
        #expect(Self.test(.within, ["near"]).explain { _ in "2" } == [#"true   a.beacon.prox within "near"  (a.beacon.prox is "2", near)"#])
        #expect(Self.test(.within, ["near"]).explain { _ in "0" } == [#"false  a.beacon.prox within "near"  (a.beacon.prox is "0", unknown)"#])
        #expect(Self.test(.le, ["2"]).explain { _ in "0" } == [#"true   a.beacon.prox le "2"  (a.beacon.prox is "0")"#])
    }
}

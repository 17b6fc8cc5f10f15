/// How the members of a trusted fleet are told from the crowd before anyone connects to them.
///
/// A keyed node adds two bytes to its power frame (``NodePowerFrame``): a tag computed from the
/// address it advertises from and the fleet key (ProximityTrust's `KeyedMemberTag`). A member that
/// hears an advertisement whose tag matches the address it came from gives that address the
/// identification slot kept for members (``IdentificationScheduler``), so a flood of advertisers of
/// the general UUID that never answer does not hold members back. The tag proves nothing: the
/// identification still does; it only orders the queue. Copied to another address it does not
/// match; an outsider who guesses has 1 chance in 65,536 per address, and then gets one try in the
/// members' slot.
public protocol MemberTagging: Sendable {
    /// The two bytes the node advertising from `address` (uppercase) sends.
    func tag(for address: String) -> [UInt8]
}

extension MemberTagging {
    /// Whether `tag` is the one a member advertising from `address` sends.
    public func isMember(_ address: String, tag: [UInt8]?) -> Bool {
        guard let tag, tag.count == NodePowerFrame.memberTagLength else { return false }
        return self.tag(for: address.uppercased()) == tag
    }
}

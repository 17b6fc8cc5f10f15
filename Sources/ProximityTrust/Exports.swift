/// The node's trust is built on libcrypto's handles and the IRK type: its users get them with it.
@_exported import LibCrypto

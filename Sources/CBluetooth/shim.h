// libbluetooth (BlueZ's libbluetooth-dev), for the kernel-level checks of `proximityctl doctor`:
// what D-Bus cannot tell when bluetoothd is missing. Only ProximityDiagnostics imports it, and
// wraps it in Swift types that own the C handles (`HCISocket`, `HCIDeviceInfo`).
//
// What is here is what Swift cannot import by itself: function-like macros (`HCIGETDEVINFO`
// is an `_IOR`) and `hci_test_bit`, which takes a non-const pointer. The rest (`socket`,
// `close`, `ba2str`, `AF_BLUETOOTH`, `BTPROTO_HCI`) Swift calls directly.
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

/// `ioctl(fd, HCIGETDEVINFO, info)` for controller hci`dev_id` on a raw HCI socket: 0 and `info`
/// filled, or -errno (ENODEV: no such controller). What libbluetooth's `hci_devinfo` does on a
/// socket of its own.
static inline int proximityd_hci_devinfo(int fd, int dev_id, struct hci_dev_info *info) {
    memset(info, 0, sizeof(*info));
    info->dev_id = (uint16_t)dev_id;
    if (ioctl(fd, HCIGETDEVINFO, (void *)info) < 0) return -errno;
    return 0;
}

static inline int proximityd_hci_is_up(const struct hci_dev_info *info) {
    return hci_test_bit(HCI_UP, (void *)&info->flags) ? 1 : 0;
}

/// LE supported, from the controller's LMP features (byte 4, bit 6).
static inline int proximityd_hci_supports_le(const struct hci_dev_info *info) {
    return (info->features[4] & LMP_LE) ? 1 : 0;
}

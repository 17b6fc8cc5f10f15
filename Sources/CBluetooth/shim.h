// libbluetooth (BlueZ's libbluetooth-dev), for the kernel-level checks of `proximityctl doctor`:
// what D-Bus cannot tell when bluetoothd is missing. Only proximityctl imports it.
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

/// 0 if the kernel opens a raw HCI socket, else -errno (EAFNOSUPPORT: no Bluetooth in the kernel).
static inline int proximityd_bt_probe(void) {
    int fd = socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI);
    if (fd < 0) return -errno;
    close(fd);
    return 0;
}

/// What the kernel says of controller hciN: 0 and `info` filled, or -errno (ENODEV: none).
static inline int proximityd_hci_info(int dev_id, struct hci_dev_info *info) {
    memset(info, 0, sizeof(*info));
    if (hci_devinfo(dev_id, info) < 0) return -errno;
    return 0;
}

static inline int proximityd_hci_is_up(const struct hci_dev_info *info) {
    return hci_test_bit(HCI_UP, (void *)&info->flags) ? 1 : 0;
}

/// LE supported, from the controller's LMP features (byte 4, bit 6).
static inline int proximityd_hci_supports_le(const struct hci_dev_info *info) {
    return (info->features[4] & LMP_LE) ? 1 : 0;
}

static inline void proximityd_hci_address(const struct hci_dev_info *info, char out[18]) {
    ba2str(&info->bdaddr, out);
}

"""Connect with bleak, read one characteristic, report it as JSON.

Usage: DBUS_SYSTEM_BUS_ADDRESS=<box bus> python connect_read.py ADDRESS CHARACTERISTIC_UUID [TIMEOUT]

Finds the device by scanning, connects (bleak waits for ServicesResolved), reads the
characteristic, disconnects, and prints {"value", "services", "characteristics"}.
"""

import asyncio
import json
import sys

from bleak import BleakClient, BleakScanner


async def main(address: str, characteristic_uuid: str, timeout: float) -> int:
    device = await BleakScanner.find_device_by_address(address, timeout=timeout)
    if device is None:
        print(json.dumps({"error": f"{address} not found within {timeout} s"}))
        return 1
    async with BleakClient(device, timeout=timeout) as client:
        value = await client.read_gatt_char(characteristic_uuid)
        services = [s.uuid for s in client.services]
        characteristics = [c.uuid for s in client.services for c in s.characteristics]
    print(json.dumps({"value": value.decode("utf-8", "replace"), "services": services,
                      "characteristics": characteristics}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 10.0)))

"""Scan with bleak and report one device's advertisement as JSON.

Usage: DBUS_SYSTEM_BUS_ADDRESS=<box bus> python scan.py ADDRESS SERVICE_UUID [TIMEOUT]

Exits 0 and prints {"address", "rssi", "service_uuids", "local_name"} once the device was seen
advertising SERVICE_UUID; exits 1 if it was not seen within TIMEOUT seconds (default 10).
"""

import asyncio
import json
import sys

from bleak import BleakScanner


async def main(address: str, service_uuid: str, timeout: float) -> int:
    seen = asyncio.Event()
    result: dict = {}

    def on_advertisement(device, advertisement) -> None:
        if device.address.upper() != address.upper():
            return
        if service_uuid.lower() not in [u.lower() for u in advertisement.service_uuids]:
            return
        result.update(
            address=device.address,
            rssi=advertisement.rssi,
            service_uuids=advertisement.service_uuids,
            local_name=advertisement.local_name,
        )
        seen.set()

    async with BleakScanner(detection_callback=on_advertisement, service_uuids=[service_uuid]):
        try:
            await asyncio.wait_for(seen.wait(), timeout)
        except asyncio.TimeoutError:
            print(json.dumps({"error": f"{address} not seen within {timeout} s"}))
            return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 10.0)))

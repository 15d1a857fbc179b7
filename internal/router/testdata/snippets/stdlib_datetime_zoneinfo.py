# tier: nano
# reason: nano: imports only datetime, zoneinfo (all in nano)
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

now = datetime(2024, 3, 10, 12, 0, tzinfo=ZoneInfo("Europe/Paris"))
for days in range(3):
    print((now + timedelta(days=days)).astimezone(ZoneInfo("America/New_York")))

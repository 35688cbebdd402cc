"""sanitizer.no_reports DIR: fails, printing them, if any process of the sanitized tests wrote a report."""
import os
import sys

directory = sys.argv[1]
reports = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
for name in reports:
    with open(os.path.join(directory, name), errors="replace") as f:
        print(f"==== {name}\n{f.read()}")
if reports:
    sys.exit(f"{len(reports)} sanitizer report(s) in {directory}")
print("no sanitizer reports")

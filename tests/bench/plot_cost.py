"""Draws docs/benchmarks-cost.png from the figures `scripts/bench plot` measured (a JSON file): run with the
shared venv's Python, which has matplotlib (a bench-only dependency; scripts/bench plot installs it there
when it is missing). usage: plot_cost.py DATA.json OUTPUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def main():
    data = json.load(open(sys.argv[1]))
    labels = {"before": f"before ({data['before']})", "after": f"after ({data['after']})"}
    styles = {"before": dict(color="tab:red", marker="o"), "after": dict(color="tab:blue", marker="s")}
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.6))

    files = data["files"]
    for side in ("before", "after"):
        axes[0].plot(files["counts"], files[side], label=labels[side], **styles[side])
    axes[0].set_xscale("symlog", linthresh=100)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("other guarded files open")
    axes[0].set_ylabel("instructions added per operation")
    axes[0].set_title("guarded open + 64 B write + close\n(callgrind, user space)")

    labels = dict(labels, before=f"before ({data.get('exec_before', data['before'])})")
    execs = data["exec"]
    for side in ("before", "after"):
        axes[1].plot(execs["counts"], execs[side], label=labels[side], **styles[side])
    axes[1].set_ylim(bottom=0)  # the new program's fixed start-up dominates: a linear scale shows how flat
    axes[1].set_xlabel("inherited unguarded descriptors")
    axes[1].set_ylabel("instructions added per fork + exec")
    axes[1].set_title("fork + exec of /bin/true, parent and new program\n(callgrind, user space)")

    timed = data["exec_timed"]
    for side in ("before", "after"):
        medians = [r["median"] for r in timed[side]]
        lows = [r["median"] - r["low"] for r in timed[side]]
        highs = [r["high"] - r["median"] for r in timed[side]]
        axes[2].errorbar(timed["counts"], medians, yerr=[lows, highs], capsize=4, label=labels[side], **styles[side])
    axes[2].axhline(1.5, color="gray", linestyle="--", linewidth=1, label="issue 27's target (1.5)")
    axes[2].set_yscale("log")
    axes[2].set_xlabel("inherited unguarded descriptors")
    axes[2].set_ylabel("time with / without the library")
    axes[2].set_title(f"the same fork + exec, timed\n(median of {timed['rounds']} interleaved rounds, "
                      f"bars: range; load {timed['load']})")
    for axis in (axes[0], axes[2]):  # plain numbers on the log scales
        axis.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:,g}"))
        axis.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[0].xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:,g}"))
    for axis in axes:
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    for axis in axes:
        axis.title.set_fontsize(10)
    figure.suptitle("What libappendguard.so adds as guarded files and inherited descriptors grow "
                    f"(scripts/bench plot, {data['date']})")
    figure.tight_layout()
    figure.savefig(sys.argv[2], dpi=90)


if __name__ == "__main__":
    main()

"""Dendrogram figure of the clustering (one panel per group, largest first)."""
from __future__ import annotations

import numpy as np

from .select import _metric


def dendrogram_png(path: str, reps, vectors: dict, metric: str, method: str, cut: float,
                   max_groups: int = 4) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.cluster.hierarchy import dendrogram, linkage
    from scipy.spatial.distance import pdist

    sizes = reps.groupby("group").size().sort_values(ascending=False)
    groups = [g for g in sizes.index if sizes[g] > 1][:max_groups]
    fig, axes = plt.subplots(max(len(groups), 1), 1, figsize=(9, 3.2 * max(len(groups), 1)),
                             squeeze=False)
    if not groups:
        axes[0, 0].text(0.5, 0.5, "every group has one rank: nothing to cluster",
                        ha="center", va="center")
        axes[0, 0].set_axis_off()
    for ax, g in zip(axes[:, 0], groups):
        ranks = reps.loc[reps["group"] == g, "rank"].to_numpy()
        if len(ranks) > 2000:          # a readable figure needs far fewer leaves
            ranks = ranks[np.linspace(0, len(ranks) - 1, 2000).astype(int)]
        X = np.vstack([vectors[r] for r in ranks])
        Z = linkage(pdist(X, _metric(metric)), method=method)
        dendrogram(Z, ax=ax, labels=[str(r) for r in ranks], color_threshold=cut,
                   truncate_mode="lastp" if len(ranks) > 64 else None, p=48,
                   leaf_rotation=90)
        ax.axhline(cut, color="red", linestyle="--", linewidth=1)
        ax.set_title(f"group {g}: {sizes[g]} ranks, cut at {cut:.3g} s "
                     f"({metric}, {method} linkage)", fontsize=10)
        ax.set_ylabel("distance (s)")
        ax.set_xlabel("rank")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

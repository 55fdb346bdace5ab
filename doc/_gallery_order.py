"""The order of the examples in the gallery: the main comparisons first.

``sphinx_gallery_conf['within_subsection_order']`` names this class by its
qualified name (a string keeps the configuration picklable).
"""
ORDER = [
    "plot_single_pass_curves.py",
    "plot_regression_unscaled.py",
    "plot_out_of_core_text.py",
    "plot_alpha_and_c.py",
    "plot_sgdqn_vs_sgd.py",
    "plot_sbm_vs_sgd.py",
    "plot_psa_crf_table.py",
    "crfsuite_tutorial.py",
    "plot_command_line.py",
    "dask_parameter_mixing.py",
    "demo.py",
]


class GalleryOrder:
    """Sort key of sphinx-gallery: position in ``ORDER``, then the name."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename):
        return (ORDER.index(filename) if filename in ORDER else len(ORDER), filename)

    def __repr__(self):
        return f"{type(self).__name__}()"

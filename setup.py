"""Packaging for the Gradient Health TensorBoard plugin."""

import os

import setuptools

HERE = os.path.dirname(os.path.abspath(__file__))


def _version():
    scope = {}
    with open(os.path.join(HERE, "gradhealth_plugin", "__init__.py")) as f:
        exec(f.read(), scope)
    return scope["__version__"]


setuptools.setup(
    name="tensorboard-plugin-gradhealth",
    version=_version(),
    description="A TensorBoard tab that diagnoses gradient, weight and activation health per layer and step",
    long_description=open(os.path.join(HERE, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=setuptools.find_packages(include=["gradhealth_plugin", "gradhealth_plugin.*"]),
    package_data={"gradhealth_plugin": ["static/*.js"]},
    python_requires=">=3.9",
    install_requires=["tensorboard>=2.12", "numpy>=1.21", "werkzeug>=1.0.1"],
    extras_require={
        "tf": ["tensorflow>=2.12"],
        "torch": ["torch>=2.1"],
        "lightning": ["torch>=2.1", "lightning>=2.0"],
        "transformers": ["torch>=2.1", "transformers>=4.30", "accelerate>=1.1"],
    },
    entry_points={
        "tensorboard_plugins": ["gradhealth = gradhealth_plugin.plugin:GradHealthLoader"],
        "console_scripts": ["gradhealth = gradhealth_plugin.cli:main"],
    },
    classifiers=["Programming Language :: Python :: 3", "Topic :: Scientific/Engineering :: Artificial Intelligence"],
)

from setuptools import find_packages, setup

setup(
    name="tfmesos",
    version="0.1.0",
    description="Run distributed TensorFlow on Apache Mesos, or on an embedded local master",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="BSD-3-Clause",
    python_requires=">=3.9",
    packages=find_packages(include=["tfmesos", "tfmesos.*", "mesos_local", "mesos_local.*"]),
    # Mesos' v1 schemas (mesos_local/proto/, read at run time on the first
    # application/x-protobuf request: mesos_local/api/proto.py).
    package_data={"mesos_local": ["proto/README.md", "proto/mesos/v1/*.proto",
                                  "proto/mesos/v1/*/*.proto"]},
    # cloudpickle: tfmesos.run's functions and results (small, pure Python);
    # protobuf: the embedded master's application/x-protobuf (its descriptors).
    install_requires=["addict>=2.4", "kazoo>=2.9", "cloudpickle>=2.2", "protobuf>=4.21"],
    extras_require={
        "tensorflow": ["tensorflow>=2.12", "tensorboard"],
        "docker": ["docker>=6.0"],
        "examples": ["scikit-learn", "tf-keras"],
        # Keras 3 on JAX (CPU), trained across workers with keras.distribution
        "keras-jax": ["jax"],
        # tfrun --torch (DDP, torchrun) and --jax, and their examples; the test
        # command installs torch==2.13.0 first, the CPU wheel (an unpinned torch
        # from PyPI brings GBs of CUDA libraries); jax.shard_map: JAX 0.8
        "torch": ["torch>=2.1"],
        "jax": ["jax>=0.8"],
        # tfmesos.lightning.MetricsLogger, examples/torch_lightning.py: pure
        # Python; its torch requirement (>=2.1) is met by the torch installed
        # first, which pip's default upgrade strategy (only-if-needed) keeps
        "lightning": ["lightning>=2.0", "torch>=2.1"],
        # tfrun --mlflow, cluster(mlflow=...): the MLflow client (no server)
        # and what MLflow's default store, sqlite:///mlflow.db, needs
        # (SQLAlchemy and alembic, with the bounds the full mlflow package
        # sets): ~33 MB installed more than mlflow-skinny alone.
        "mlflow": ["mlflow-skinny>=2.10", "sqlalchemy>=1.4.0,<3", "alembic!=1.10.0,<2"],
        # avmesos, avmesos-cli: Mesos clients this project did not write, which
        # the tests run against the embedded master (test_avmesos, test_mesos_cli);
        # jsonschema checks every run.json the tests write against docs/run.schema.json;
        # ruff, mypy and vermin are the static checks (pinned: a newer release may
        # find more, and the test command must pass as it did); nbformat, nbclient
        # and ipykernel run tfmesos.run from a real notebook kernel; grpcio-tools
        # (protoc) compiles Mesos' protos in test_protobuf_api. (The
        # `mlflow server` that test_mlflow_server logs to, the full mlflow
        # package, scripts/test.sh installs into a virtual environment of its
        # own: beside TensorFlow its matplotlib and pandas cost every process.)
        # pytest 9.2 keeps a node's id where pytest-xdist 3.8's --dist
        # loadgroup cannot rename it: every test's xdist_group is lost (the
        # tests of one Docker engine ran on both workers and killed each
        # other's containers); tests/conftest.py says so should one be there.
        "test": ["pytest>=7,<9.2", "pytest-timeout", "pytest-xdist>=3", "avmesos>=0.4.2",
                 "avmesos-cli>=1.0.0", "jsonschema>=4", "ruff==0.17.6", "mypy==2.4.1", "vermin==1.9.2",
                 "nbformat", "nbclient", "ipykernel", "grpcio-tools"],
    },
    entry_points={
        "console_scripts": [
            "tfrun = tfmesos.cli:tfrun_script",
            "tfmesos = tfmesos.cli:tfmesos_script",
            # The embedded Mesos master on its own, for any framework's tests.
            "mesos-local = mesos_local.command_line:main",
        ],
    },
)

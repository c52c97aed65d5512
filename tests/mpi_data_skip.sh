# Sourced by the shell tests that train on Fashion-MNIST under mpirun: sets data= and exits 77 (ctest's
# skip) when the data set or mpirun is missing.
data="${ODL_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}"
if [ ! -e "$data/train-images-idx3-ubyte.gz" ] && [ ! -e "$data/train-images-idx3-ubyte" ]; then
    echo "SKIP: no Fashion-MNIST in $data (set ODL_FMNIST_DIR)"
    exit 77
fi
if ! command -v mpirun >/dev/null 2>&1 && [ -z "${MPIEXEC:-}" ]; then
    echo "SKIP: no mpirun"
    exit 77
fi

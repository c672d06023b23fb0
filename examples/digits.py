"""The data every training example uses: scikit-learn's bundled digits (8x8
images, 10 classes, 1797 samples; nothing is downloaded), scaled to [0, 1]
and split 80/20 the same way in every process."""

SEED = 0


def load_data():
    """(x_train, y_train), (x_test, y_test) as float32 / int64 arrays."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        (x / 16.0).astype("float32"), y.astype("int64"), test_size=0.2, random_state=SEED,
        stratify=y)
    return (x_train, y_train), (x_test, y_test)


def build_model(keras, learning_rate):
    """The examples' model, compiled: 64 inputs, 64 ReLU units, 10 logits,
    Adam and sparse cross-entropy; ``keras``: tf_keras or Keras 3."""
    model = keras.Sequential([
        keras.layers.Input(shape=(64,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model

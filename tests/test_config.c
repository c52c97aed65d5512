/* Configuration: the key table, defaults, YAML loading, validation messages, CLI overrides, the
 * effective config round trip, and that docs/config.md and config.yaml are in step with the table.
 *
 *   test_config                 run the checks
 *   test_config --regen SRCDIR  rewrite SRCDIR/docs/config.md and SRCDIR/config.yaml from the table
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/models.h"
#include "worker/config.h"
#include "test_util.h"

static char g_dir[256];

static const char *write_file(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return path;
    }
    fputs(text, f);
    fclose(f);
    return path;
}

static char *doc_string(odl_config_doc_format fmt) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    odl_config_doc_write(f, fmt);
    fclose(f);
    return buf;
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = calloc((size_t)n + 1, 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int regen(const char *src) {
    char path[1024];
    const struct { const char *rel; odl_config_doc_format fmt; } outs[] = {
        {"docs/config.md", ODL_CONFIG_DOC_MARKDOWN}, {"config.yaml", ODL_CONFIG_DOC_YAML}};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", src, outs[i].rel);
        FILE *f = fopen(path, "wb");
        if (!f) {
            perror(path);
            return 1;
        }
        odl_config_doc_write(f, outs[i].fmt);
        fclose(f);
        printf("wrote %s\n", path);
    }
    return 0;
}

/* The message of the last error contains every one of the given pieces. */
static int msg_has(const char *a, const char *b, const char *c) {
    const char *m = odl_error_msg();
    return strstr(m, a) && (!b || strstr(m, b)) && (!c || strstr(m, c));
}
#define TMSG(a, b, c) TCHECK(msg_has(a, b, c), "message '%s' lacks '%s' / '%s' / '%s'", odl_error_msg(), a, b ? b : "", c ? c : "")

static void yaml_of(const odl_config *c, char *buf, size_t cap) {
    odl_status st = odl_config_to_yaml(c, buf, cap);
    if (st != ODL_OK) buf[0] = '\0';
}

static void test_table_and_defaults(void) {
    size_t n = 0;
    const odl_config_key *keys = odl_config_keys(&n);
    TCHECK(n == 31, "31 keys, got %zu", n);
    odl_config cfg, tmp;
    odl_config_defaults(&cfg);
    TCHECK(cfg.precision == ODL_PRECISION_FP32, "precision defaults to fp32 (the bit-reproducible path)");
    for (size_t i = 0; i < n; i++) {
        const odl_config_key *k = &keys[i];
        TCHECK(k->doc && k->doc[0], "%s has a doc", k->name);
        TCHECK(odl_config_find_key(k->name) == k, "%s found", k->name);
        const char *d1 = strchr(k->name, '.');
        TCHECK(!d1 || !strchr(d1 + 1, '.'), "%s: one level of sections", k->name);
        for (size_t j = 0; j < i; j++) {
            TCHECK(strcmp(keys[j].name, k->name) != 0, "duplicate key %s", k->name);
            TCHECK(keys[j].offset != k->offset, "%s and %s share a field", keys[j].name, k->name);
        }
        odl_config_defaults(&tmp);
        TOK(odl_config_set(&tmp, k->name, k->def)); /* every default is valid */
        char a[ODL_CONFIG_STR_MAX], b[ODL_CONFIG_STR_MAX];
        TOK(odl_config_get(&cfg, k->name, a, sizeof a));
        odl_config_set(&tmp, k->name, a);
        TOK(odl_config_get(&tmp, k->name, b, sizeof b));
        TCHECK(strcmp(a, b) == 0, "%s: get/set round trip '%s' vs '%s'", k->name, a, b);
    }
    TCHECK(odl_config_find_key("train") == NULL && odl_config_find_key("nope") == NULL, "find_key misses");

    /* PyTorch examples/mnist defaults. */
    TCHECK(!strcmp(odl_model_names()[cfg.model], "mnist"), "model");
    TCHECK(strcmp(cfg.data_dir, "/usr/share/datasets/fashion-mnist") == 0, "data_dir '%s'", cfg.data_dir);
    TCHECK(cfg.device == ODL_CFG_DEVICE_AUTO, "device");
    TCHECK(cfg.seed == 1, "seed");
    TCHECK(cfg.train.epochs == 14 && cfg.train.batch_size == 64 && cfg.train.test_batch_size == 1000, "sizes");
    TCHECK(cfg.train.lr == 1.0 && cfg.train.gamma == 0.7 && cfg.train.momentum == 0 && cfg.train.weight_decay == 0,
           "lr %g gamma %g", cfg.train.lr, cfg.train.gamma);
    TCHECK(cfg.train.optimizer == ODL_OPTIM_ADADELTA, "optimizer");
    TCHECK(cfg.train.max_steps == 0 && cfg.train.max_train_samples == 0 && cfg.train.max_test_samples == 0, "limits");
    TCHECK(cfg.train.dropout && cfg.train.eval_every_epoch, "bools");
    TCHECK(cfg.memory.preallocate_fraction == 0.5, "preallocate");
    TCHECK(cfg.logging.level == ODL_LOG_LEVEL_INFO && cfg.logging.metrics_out[0] == 0 &&
               cfg.logging.progress == ODL_CFG_PROGRESS_AUTO, "logging");
    TCHECK(cfg.checkpoint.dir[0] == 0 && cfg.checkpoint.every == 0 && cfg.checkpoint.keep == 3 &&
               cfg.checkpoint.resume[0] == 0, "checkpoint");
    TCHECK(cfg.dist.bucket_mb == 25 && cfg.dist.timeout_s == 300, "dist");
}

static void test_load(void) {
    odl_config cfg;
    odl_config_defaults(&cfg);
    const char *p = write_file("good.yaml",
                               "# a comment\n"
                               "model: mnist_mlp\n"
                               "data_dir: /data/mnist   # trailing comment\n"
                               "device: cpu\n"
                               "seed: 42\n"
                               "train:\n"
                               "  epochs: 2\n"
                               "  batch_size: 128\n"
                               "  lr: 1e-3\n"
                               "  optimizer: adamw\n"
                               "  momentum: 0.9\n"
                               "  weight_decay: 0.01\n"
                               "  dropout: false\n"
                               "  eval_every_epoch: no\n"
                               "memory: {preallocate_fraction: 1}\n"
                               "logging:\n"
                               "  level: debug\n"
                               "  metrics_out: \"out/metrics.jsonl\"\n"
                               "  progress: off\n"
                               "checkpoint:\n"
                               "  dir:\n"
                               "  resume: auto\n"
                               "  every: 500\n"
                               "dist.timeout_s: 60.5\n");
    TOK(odl_config_load_file(&cfg, p));
    TCHECK(!strcmp(odl_model_names()[cfg.model], "mnist_mlp") && cfg.device == ODL_CFG_DEVICE_CPU && cfg.seed == 42, "top");
    TCHECK(strcmp(cfg.data_dir, "/data/mnist") == 0, "data_dir '%s'", cfg.data_dir);
    TCHECK(cfg.train.epochs == 2 && cfg.train.batch_size == 128 && cfg.train.test_batch_size == 1000, "train ints");
    TCHECK(cfg.train.lr == 1e-3 && cfg.train.momentum == 0.9 && cfg.train.weight_decay == 0.01, "train floats");
    TCHECK(cfg.train.optimizer == ODL_OPTIM_ADAMW, "optimizer");
    TCHECK(!cfg.train.dropout && !cfg.train.eval_every_epoch, "bools");
    TCHECK(cfg.memory.preallocate_fraction == 1.0, "fraction 1 allowed");
    TOK(odl_config_set(&cfg, "memory.preallocate_fraction", "0"));
    TCHECK(cfg.memory.preallocate_fraction == 0.0, "fraction 0 (grow on demand) allowed");
    TCHECK(cfg.train.cuda_graph, "train.cuda_graph defaults to on");
    TOK(odl_config_set(&cfg, "train.cuda_graph", "off"));
    TCHECK(!cfg.train.cuda_graph, "train.cuda_graph off");
    TFAIL(odl_config_set(&cfg, "train.cuda_graph", "sometimes"), ODL_E_CONFIG);
    TMSG("train.cuda_graph", "sometimes", NULL);
    TCHECK(cfg.logging.level == ODL_LOG_LEVEL_DEBUG && cfg.logging.progress == ODL_CFG_PROGRESS_OFF, "logging");
    TCHECK(strcmp(cfg.logging.metrics_out, "out/metrics.jsonl") == 0, "metrics_out");
    TCHECK(cfg.checkpoint.dir[0] == 0 && strcmp(cfg.checkpoint.resume, "auto") == 0 && cfg.checkpoint.every == 500,
           "checkpoint");
    TCHECK(cfg.dist.timeout_s == 60.5 && cfg.dist.bucket_mb == 25, "dist");

    /* Empty file and comments only: nothing changes. */
    odl_config a, b;
    odl_config_defaults(&a);
    odl_config_defaults(&b);
    TOK(odl_config_load_file(&a, write_file("empty.yaml", "")));
    TOK(odl_config_load_file(&a, write_file("comments.yaml", "# nothing\n---\n")));
    char ya[ODL_CONFIG_YAML_MAX], yb[ODL_CONFIG_YAML_MAX];
    yaml_of(&a, ya, sizeof ya);
    yaml_of(&b, yb, sizeof yb);
    TCHECK(ya[0] && strcmp(ya, yb) == 0, "empty file keeps defaults");
}

/* A file that must fail with `code`, leave the config unchanged and name the pieces. */
static void expect_file_error(const char *name, const char *text, odl_status code, const char *a, const char *b,
                              const char *c) {
    odl_config cfg, before;
    odl_config_defaults(&cfg);
    odl_config_set(&cfg, "train.lr", "0.25");
    before = cfg;
    const char *p = write_file(name, text);
    TFAIL(odl_config_load_file(&cfg, p), code);
    TMSG(a, b, c);
    TCHECK(memcmp(&cfg, &before, sizeof cfg) == 0, "%s: config changed by a failed load", name);
    if (getenv("ODL_TEST_VERBOSE")) printf("%s -> %s\n", name, odl_error_msg());
}

static void test_load_errors(void) {
    char where[600];
    snprintf(where, sizeof where, "%s/unknown.yaml:3:", g_dir);
    expect_file_error("unknown.yaml", "train:\n  epochs: 3\n  lrr: 0.1\n", ODL_E_CONFIG, where,
                      "unknown key 'train.lrr'", "did you mean 'train.lr'");
    expect_file_error("unknown2.yaml", "model: mnist\nlr: 0.5\n", ODL_E_CONFIG, "unknown2.yaml:2:",
                      "unknown key 'lr'", "did you mean 'train.lr'");
    expect_file_error("unknown3.yaml", "optimiser:\n  foo: 1\n", ODL_E_CONFIG, "unknown3.yaml:1:",
                      "unknown key 'optimiser'", NULL);
    expect_file_error("unknown4.yaml", "zzzzzz: 1\n", ODL_E_CONFIG, "unknown4.yaml:1:", "unknown key 'zzzzzz'",
                      "docs/config.md");
    expect_file_error("badint.yaml", "train:\n  batch_size: sixty\n", ODL_E_CONFIG, "badint.yaml:2:",
                      "train.batch_size: value 'sixty' is not an integer", "allowed: an integer >= 1");
    expect_file_error("range.yaml", "train:\n\n  batch_size: 0\n", ODL_E_CONFIG, "range.yaml:3:",
                      "train.batch_size: value '0' is out of range", "allowed: an integer >= 1");
    expect_file_error("float.yaml", "train:\n  epochs: 1.5\n", ODL_E_CONFIG, "float.yaml:2:",
                      "train.epochs: value '1.5' is not an integer", NULL);
    expect_file_error("lr.yaml", "train: {lr: 0}\n", ODL_E_CONFIG, "lr.yaml:1:", "train.lr: value '0' is out of range",
                      "allowed: a number > 0");
    expect_file_error("nan.yaml", "train: {lr: .nan}\n", ODL_E_CONFIG, "nan.yaml:1:", "value '.nan'",
                      "not a finite number");
    expect_file_error("frac.yaml", "memory:\n  preallocate_fraction: 1.5\n", ODL_E_CONFIG, "frac.yaml:2:",
                      "memory.preallocate_fraction: value '1.5' is out of range", "allowed: a number in [0, 1]");
    expect_file_error("fracneg.yaml", "memory:\n  preallocate_fraction: -0.1\n", ODL_E_CONFIG, "fracneg.yaml:2:",
                      "out of range", "[0, 1]");
    expect_file_error("enum.yaml", "train:\n  optimizer: rmsprop\n", ODL_E_CONFIG, "enum.yaml:2:",
                      "train.optimizer: value 'rmsprop' is not allowed", "one of adadelta|sgd|adam|adamw");
    expect_file_error("enum2.yaml", "model: resnet\n", ODL_E_CONFIG, "enum2.yaml:1:", "model: value 'resnet'",
                      "one of mnist|mnist_cnn|mnist_mlp");
    expect_file_error("bool.yaml", "train:\n  dropout: maybe\n", ODL_E_CONFIG, "bool.yaml:2:",
                      "train.dropout: value 'maybe' is not a boolean", "true or false");
    expect_file_error("empty_int.yaml", "seed:\n", ODL_E_CONFIG, "empty_int.yaml:1:", "seed: value ''",
                      "not an integer");
    expect_file_error("negseed.yaml", "seed: -1\n", ODL_E_CONFIG, "negseed.yaml:1:", "seed: value '-1'",
                      "an integer >= 0");
    expect_file_error("section.yaml", "train: 5\n", ODL_E_CONFIG, "section.yaml:1:", "'train' is a section",
                      "epochs, batch_size");
    expect_file_error("leafmap.yaml", "model:\n  name: mnist\n", ODL_E_CONFIG, "leafmap.yaml:1:",
                      "model takes a single value, not a mapping", NULL);
    expect_file_error("list.yaml", "train:\n  epochs: [1, 2]\n", ODL_E_CONFIG, "list.yaml:2:",
                      "train.epochs takes a single value, not a list", NULL);
    expect_file_error("dup.yaml", "train:\n  epochs: 1\nseed: 3\ntrain.epochs: 2\n", ODL_E_CONFIG, "dup.yaml:4:",
                      "train.epochs is given twice", "first on line 2");
    expect_file_error("toplist.yaml", "- model: mnist\n", ODL_E_CONFIG, "toplist.yaml:1:",
                      "top level must be a mapping", NULL);
    expect_file_error("syntax.yaml", "train:\n  epochs: 3\n   batch_size: 5\n", ODL_E_FORMAT, "syntax.yaml:3:",
                      "YAML syntax error", NULL);
    expect_file_error("syntax2.yaml", "model: [mnist\n", ODL_E_FORMAT, "syntax2.yaml:", "YAML syntax error", NULL);
    expect_file_error("twodocs.yaml", "model: mnist\n---\nseed: 2\n", ODL_E_CONFIG, "twodocs.yaml:",
                      "second YAML document", NULL);
    /* Failure after good keys: nothing of the file is applied. */
    expect_file_error("partial.yaml", "seed: 7\ntrain:\n  lr: 0.5\n  epochs: 0\n", ODL_E_CONFIG, "partial.yaml:4:",
                      "train.epochs", NULL);

    odl_config cfg;
    odl_config_defaults(&cfg);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no_such.yaml", g_dir);
    TFAIL(odl_config_load_file(&cfg, missing), ODL_E_NOTFOUND);
    TMSG(missing, "cannot open", NULL);
}

static void test_set(void) {
    odl_config cfg;
    odl_config_defaults(&cfg);
    TOK(odl_config_set(&cfg, "train.lr", "0.05"));
    TCHECK(cfg.train.lr == 0.05, "lr");
    TOK(odl_config_set(&cfg, "logging.level", "error"));
    TCHECK(cfg.logging.level == ODL_LOG_LEVEL_ERROR, "level");
    TOK(odl_config_set(&cfg, "checkpoint.resume", "/ckpt/step_100.h5"));
    TCHECK(strcmp(cfg.checkpoint.resume, "/ckpt/step_100.h5") == 0, "resume");
    TOK(odl_config_set_arg(&cfg, "--train.batch_size=32"));
    TOK(odl_config_set_arg(&cfg, "device=cuda"));
    TOK(odl_config_set_arg(&cfg, "--checkpoint.dir="));
    TCHECK(cfg.train.batch_size == 32 && cfg.device == ODL_CFG_DEVICE_CUDA && cfg.checkpoint.dir[0] == 0, "set_arg");
    TOK(odl_config_set(&cfg, "train.dropout", "0"));
    TCHECK(!cfg.train.dropout, "dropout 0");
    TOK(odl_config_set(&cfg, "train.dropout", "ON"));
    TCHECK(cfg.train.dropout, "dropout ON");

    odl_config before = cfg;
    TFAIL(odl_config_set(&cfg, "train.batchsize", "3"), ODL_E_CONFIG);
    TMSG("unknown key 'train.batchsize'", "did you mean 'train.batch_size'", NULL);
    TFAIL(odl_config_set(&cfg, "train", "3"), ODL_E_CONFIG);
    TMSG("'train' is a section", NULL, NULL);
    TFAIL(odl_config_set(&cfg, "train.epochs", "-2"), ODL_E_CONFIG);
    TMSG("train.epochs: value '-2' is out of range", "an integer >= 1", NULL);
    TFAIL(odl_config_set(&cfg, "train.epochs", "99999999999999999999999"), ODL_E_CONFIG);
    TMSG("not an integer", NULL, NULL);
    TFAIL(odl_config_set(&cfg, "train.lr", "fast"), ODL_E_CONFIG);
    TMSG("train.lr: value 'fast'", "a number > 0", NULL);
    TFAIL(odl_config_set(&cfg, "train.lr", "inf"), ODL_E_CONFIG);
    TFAIL(odl_config_set(&cfg, "train.lr", "1e400"), ODL_E_CONFIG);
    TFAIL(odl_config_set(&cfg, "train.weight_decay", "-0.1"), ODL_E_CONFIG);
    TFAIL(odl_config_set(&cfg, "device", "CUDA"), ODL_E_CONFIG);
    TMSG("device: value 'CUDA'", "one of auto|cpu|cuda", NULL);
    TFAIL(odl_config_set(&cfg, "dist.bucket_mb", "0"), ODL_E_CONFIG);
    TFAIL(odl_config_set(&cfg, "checkpoint.keep", "0"), ODL_E_CONFIG);
    TFAIL(odl_config_set_arg(&cfg, "--train.lr"), ODL_E_CONFIG);
    TMSG("not of the form key=value", NULL, NULL);
    {
        char *huge = malloc(ODL_CONFIG_STR_MAX + 10);
        memset(huge, 'x', ODL_CONFIG_STR_MAX + 9);
        huge[ODL_CONFIG_STR_MAX + 9] = '\0';
        TFAIL(odl_config_set(&cfg, "data_dir", huge), ODL_E_CONFIG);
        TMSG("data_dir: value 'xxxx", "...", "at most 4095 bytes");
        free(huge);
    }
    TCHECK(memcmp(&cfg, &before, sizeof cfg) == 0, "failed sets change nothing");

    char buf[64];
    TOK(odl_config_get(&cfg, "train.lr", buf, sizeof buf));
    TCHECK(strcmp(buf, "0.05") == 0, "get lr '%s'", buf);
    TOK(odl_config_get(&cfg, "train.gamma", buf, sizeof buf));
    TCHECK(strcmp(buf, "0.7") == 0, "get gamma '%s'", buf);
    TOK(odl_config_get(&cfg, "dist.timeout_s", buf, sizeof buf));
    TCHECK(strcmp(buf, "300.0") == 0, "float keeps a decimal point '%s'", buf);
    TOK(odl_config_get(&cfg, "train.optimizer", buf, sizeof buf));
    TCHECK(strcmp(buf, "adadelta") == 0, "get optimizer '%s'", buf);
    TFAIL(odl_config_get(&cfg, "checkpoint.resume", buf, 4), ODL_E_INVAL);
    TFAIL(odl_config_get(&cfg, "nope", buf, sizeof buf), ODL_E_CONFIG);
}

static void test_yaml_round_trip(void) {
    odl_config cfg, back;
    odl_config_defaults(&cfg);
    TOK(odl_config_set(&cfg, "train.lr", "0.1"));
    TOK(odl_config_set(&cfg, "train.weight_decay", "1e-7"));
    TOK(odl_config_set(&cfg, "train.gamma", "0.30000000000000004"));
    TOK(odl_config_set(&cfg, "seed", "9007199254740993"));
    TOK(odl_config_set(&cfg, "train.optimizer", "sgd"));
    TOK(odl_config_set(&cfg, "train.dropout", "false"));
    TOK(odl_config_set(&cfg, "data_dir", "/tmp/a \"quoted\" dir\\with: colon # hash\n\ttab \x01 caf\xc3\xa9"));
    TOK(odl_config_set(&cfg, "logging.metrics_out", "yes"));
    TOK(odl_config_set(&cfg, "checkpoint.dir", "123"));

    static char y1[ODL_CONFIG_YAML_MAX], y2[ODL_CONFIG_YAML_MAX];
    TOK(odl_config_to_yaml(&cfg, y1, sizeof y1));
    TCHECK(strstr(y1, "model: mnist\n") == y1, "starts with model: '%.40s'", y1);
    TCHECK(strstr(y1, "\ntrain:\n  epochs: 14\n"), "nested train section");
    TCHECK(strstr(y1, "  lr: 0.1\n") && strstr(y1, "  gamma: 0.30000000000000004\n"), "floats round-trip");
    TCHECK(strstr(y1, "  metrics_out: \"yes\"\n"), "strings quoted");
    size_t n = 0;
    const odl_config_key *keys = odl_config_keys(&n);
    for (size_t i = 0; i < n; i++) {
        const char *leaf = strrchr(keys[i].name, '.');
        char want[80];
        snprintf(want, sizeof want, "%s%s: ", leaf ? "\n  " : "", leaf ? leaf + 1 : keys[i].name);
        TCHECK(strstr(y1, want), "yaml has %s", keys[i].name);
    }

    odl_config_defaults(&back);
    TOK(odl_config_load_string(&back, y1, "effective"));
    TOK(odl_config_to_yaml(&back, y2, sizeof y2));
    TCHECK(strcmp(y1, y2) == 0, "round trip:\n%s\nvs\n%s", y1, y2);
    TCHECK(strcmp(back.data_dir, cfg.data_dir) == 0, "string with escapes survives: '%s'", back.data_dir);
    TCHECK(back.train.gamma == cfg.train.gamma && back.train.weight_decay == 1e-7 && back.seed == 9007199254740993LL,
           "exact numbers");
    TCHECK(strcmp(back.logging.metrics_out, "yes") == 0 && strcmp(back.checkpoint.dir, "123") == 0,
           "strings that look like bool/int stay strings");

    char small[100];
    TFAIL(odl_config_to_yaml(&cfg, small, sizeof small), ODL_E_INVAL);
    TMSG("needed", NULL, NULL);
    TCHECK(small[0] == '\0', "too-small buffer left empty");
}

static void test_docs(void) {
    size_t n = 0;
    const odl_config_key *keys = odl_config_keys(&n);
    char *text = doc_string(ODL_CONFIG_DOC_TEXT);
    char *md = doc_string(ODL_CONFIG_DOC_MARKDOWN);
    char *yaml = doc_string(ODL_CONFIG_DOC_YAML);
    for (size_t i = 0; i < n; i++) {
        char want[128];
        snprintf(want, sizeof want, "\n%s  (%s", keys[i].name, keys[i].type == ODL_CFG_ENUM ? "enum" : "");
        TCHECK(strstr(text, want), "doc text has %s", keys[i].name);
        TCHECK(strstr(text, keys[i].doc), "doc text has the doc of %s", keys[i].name);
        snprintf(want, sizeof want, "| `%s` |", keys[i].name);
        TCHECK(strstr(md, want), "markdown has %s", keys[i].name);
    }
    TCHECK(strstr(text, "train.lr  (float: a number > 0; default 1.0)"), "text line for train.lr");
    TCHECK(strstr(text, "data_dir  (string: a string of at most 4095 bytes; default \"/usr/share/datasets/fashion-mnist\")"),
           "text line for data_dir");

    /* The generated sample loads to exactly the defaults. */
    odl_config a, b;
    odl_config_defaults(&a);
    odl_config_defaults(&b);
    odl_config_set(&a, "train.lr", "3");
    TOK(odl_config_load_string(&a, yaml, "sample"));
    static char ya[ODL_CONFIG_YAML_MAX], yb[ODL_CONFIG_YAML_MAX];
    yaml_of(&a, ya, sizeof ya);
    yaml_of(&b, yb, sizeof yb);
    TCHECK(ya[0] && strcmp(ya, yb) == 0, "sample config equals the defaults");

    /* The committed files are in step with the table. */
    const char *src = getenv("ODL_SOURCE_DIR");
    if (src && src[0]) {
        char path[1024];
        snprintf(path, sizeof path, "%s/docs/config.md", src);
        char *f_md = read_all(path);
        TCHECK(f_md && strcmp(f_md, md) == 0, "%s is out of step with the key table in worker/config.c; run "
                                             "tests/test_config --regen %s", path, src);
        free(f_md);
        snprintf(path, sizeof path, "%s/config.yaml", src);
        char *f_yaml = read_all(path);
        TCHECK(f_yaml && strcmp(f_yaml, yaml) == 0, "%s is out of step with the key table in worker/config.c; run "
                                                   "tests/test_config --regen %s", path, src);
        odl_config c;
        odl_config_defaults(&c);
        TOK(odl_config_load_file(&c, path));
        free(f_yaml);
    } else {
        printf("ODL_SOURCE_DIR not set: not comparing docs/config.md and config.yaml\n");
    }
    free(text);
    free(md);
    free(yaml);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--regen") == 0) return regen(argv[2]);
    if (odl_test_mkdtemp(g_dir, sizeof g_dir, "test_config")) return 1;
    test_table_and_defaults();
    test_load();
    test_load_errors();
    test_set();
    test_yaml_round_trip();
    test_docs();

    odl_test_rmtree(g_dir);
    return odl_test_finish("test_config");
}

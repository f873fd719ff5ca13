#include "fm/fm_int.h"
#include "util/log.h"
#include "vmmc/fm.h"

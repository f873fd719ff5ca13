#include "util/config.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

<?php
// A PHP program whose time is in three places (a function under a function,
// a method, a closure) and a sleep, each timed by the program itself (its
// CPU time from getrusage, which a busy machine's preemption leaves out;
// the sleep by the clock); it writes the times (ns) to the file named by
// its first argument when done. Each call runs for some 5-10 ms, many
// sampling periods: calls shorter than a period (as these once were, 0.8 ms
// for all three) get a sample or none by where the period falls, which
// left a run's shares off by up to 7.5 points however exact the samples.
class Shape
{
    public function area(int $n): float
    {
        $s = 0.0;
        for ($i = 0; $i < $n; $i++) {
            $s += $i * 0.5;
        }
        return $s;
    }
}

function alpha(int $n)
{
    $s = 0;
    for ($i = 0; $i < $n; $i++) {
        $s += $i;
    }
    return $s;
}

function beta(int $n)
{
    return alpha($n) + alpha($n);
}

$square = function (int $n) {
    $s = 0;
    for ($i = 0; $i < $n; $i++) {
        $s ^= $i * $i;
    }
    return $s;
};

$out = $argv[1];
$seconds = (float)($argv[2] ?? 4);
$go = $argv[3] ?? '';
// (In a function of its own: these waits are not the timed usleep under {main}.)
function wait_for_go($go)
{
    while ($go !== '' && !file_exists($go)) {
        usleep(10000);
    }
}
wait_for_go($go);
$t = ['beta' => 0, 'Shape::area' => 0, '{closure}' => 0, 'usleep' => 0];
$shape = new Shape();
function cpu_ns()
{
    $r = getrusage();
    return ($r['ru_utime.tv_sec'] + $r['ru_stime.tv_sec']) * 1000000000 +
        ($r['ru_utime.tv_usec'] + $r['ru_stime.tv_usec']) * 1000;
}
$end = hrtime(true) + (int)($seconds * 1e9);
while (hrtime(true) < $end) {
    $a = cpu_ns();
    beta(750000);
    $b = cpu_ns();
    $shape->area(500000);
    $c = cpu_ns();
    $square(500000);
    $cd = cpu_ns();
    $d = hrtime(true);
    usleep(20000);
    $e = hrtime(true);
    $t['beta'] += $b - $a;
    $t['Shape::area'] += $c - $b;
    $t['{closure}'] += $cd - $c;
    $t['usleep'] += $e - $d;
}
file_put_contents($out . '.tmp', json_encode($t));
rename($out . '.tmp', $out);

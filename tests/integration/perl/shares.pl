# A Perl program whose time is in three places (a sub under a sub, a
# package's sub called as a method, an anonymous sub) and a wait, each
# timed by the program itself (its CPU time; the wait by the clock); it
# writes the times (ns) to the file named by its first argument when done.
# Each call runs for some 5-10 ms, many sampling periods.
use strict;
use warnings;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC CLOCK_PROCESS_CPUTIME_ID);

package Shape;

sub new { return bless {}, shift }

sub area {
    my ($self, $n) = @_;
    my $s = 0.0;
    for (my $i = 0; $i < $n; $i++) {
        $s += $i * 0.5;
    }
    return $s;
}

package main;

sub alpha {
    my ($n) = @_;
    my $s = 0;
    for (my $i = 0; $i < $n; $i++) {
        $s += $i;
    }
    return $s;
}

sub beta {
    my ($n) = @_;
    return alpha($n) + alpha($n);
}

my $square = sub {
    my ($n) = @_;
    my $s = 0;
    for (my $i = 0; $i < $n; $i++) {
        $s ^= $i * $i;
    }
    return $s;
};

sub nap {
    select(undef, undef, undef, 0.02);
}

my ($out, $seconds, $go, $n) = @ARGV;
$seconds //= 4;
$go //= '';
$n //= 120000;
select(undef, undef, undef, 0.01) while $go ne '' && !-e $go;
sub cpu_ns { return int(clock_gettime(CLOCK_PROCESS_CPUTIME_ID) * 1e9) }
sub wall_ns { return int(clock_gettime(CLOCK_MONOTONIC) * 1e9) }
my %t = (beta => 0, 'Shape::area' => 0, closure => 0, sleep => 0);
my $shape = Shape->new;
my $finish = clock_gettime(CLOCK_MONOTONIC) + $seconds;
while (clock_gettime(CLOCK_MONOTONIC) < $finish) {
    my $a = cpu_ns();
    beta($n);
    my $b = cpu_ns();
    $shape->area($n);
    my $c = cpu_ns();
    $square->($n);
    my $d = cpu_ns();
    my $e = wall_ns();
    nap();
    my $f = wall_ns();
    $t{beta} += $b - $a;
    $t{'Shape::area'} += $c - $b;
    $t{closure} += $d - $c;
    $t{sleep} += $f - $e;
}
open(my $fh, '>', "$out.tmp") or die "$out.tmp: $!";
print $fh '{' . join(', ', map { "\"$_\": $t{$_}" } sort keys %t) . "}\n";
close($fh) or die "$out.tmp: $!";
rename("$out.tmp", $out) or die "$out: $!";
